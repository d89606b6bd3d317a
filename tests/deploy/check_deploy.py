"""Consistency checks of the deployment files that no external linter knows about.

Run by tests/deploy/check_deploy.sh, one subcommand at a time; each prints what it checked and
exits non-zero listing every problem it found (not only the first).

  metrics      every metric in deploy/prometheus/alerts.yml and deploy/grafana/landfall.json is
               one landfall exports (METRICS, the list of issue 8); the dashboard's variables,
               selectors and layout; every alert is unit-tested firing with a `stream` label;
               docs/operations.md has a section per alert and explains every metric
  promql OUT   write the dashboard's queries as recording rules to OUT, with Grafana's
               variables replaced, so `promtool check rules OUT` parses every one of them
  kubernetes   what kubernetes-validate cannot see: the ServiceMonitor's structure (a CRD it has
               no schema for), references between the objects, the shard count, and the
               ConfigMap's landfall.toml against docs/configuration.md
  dockerfile   every workspace crate's manifest is copied into the dependency layer
"""

import json
import re
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]

# The metrics landfall exports (issue 8), all labelled `stream`. Histograms also appear as
# their _bucket, _sum and _count series.
METRICS = {
    "landfall_files_discovered_total",
    "landfall_files_committed_total",
    "landfall_files_skipped_total",
    "landfall_rows_committed_total",
    "landfall_bytes_committed_total",
    "landfall_rows_rescued_total",
    "landfall_files_outstanding",
    "landfall_bytes_outstanding",
    "landfall_queue_approximate_size",
    "landfall_tracked_files",
    "landfall_batch_duration_seconds",
    "landfall_commit_latency_seconds",
    "landfall_stream_up",
    "landfall_stream_restarts_total",
    "landfall_falling_behind",
    "landfall_errors_total",
    "landfall_storage_requests_total",
    "landfall_schema_version",
    "landfall_table_version",
    "landfall_notification_entry_restored_total",
    "landfall_notification_entry_check_failures_total",
    "landfall_notification_entry_ok",
}
HISTOGRAMS = {"landfall_batch_duration_seconds", "landfall_commit_latency_seconds"}

# PromQL words that are not metric names. An identifier outside this set and outside METRICS
# fails the check: either a metric landfall does not export or a function to add here.
PROMQL_WORDS = {
    # aggregations and their modifiers
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
    "count_values", "group", "by", "without", "on", "ignoring", "group_left", "group_right",
    "and", "or", "unless", "offset", "bool",
    # functions
    "rate", "irate", "increase", "delta", "idelta", "deriv", "predict_linear", "resets",
    "changes", "abs", "absent", "absent_over_time", "ceil", "floor", "round", "clamp",
    "clamp_min", "clamp_max", "histogram_quantile", "label_replace", "label_join", "time",
    "timestamp", "vector", "scalar", "sort", "sort_desc", "avg_over_time", "min_over_time",
    "max_over_time", "sum_over_time", "count_over_time", "last_over_time",
    "quantile_over_time", "stddev_over_time", "present_over_time",
    # Grafana's template functions
    "label_values",
}


class Problems:
    def __init__(self):
        self.items = []

    def add(self, where, what):
        self.items.append(f"{where}: {what}")

    def finish(self, summary):
        if self.items:
            for p in self.items:
                print(f"error: {p}", file=sys.stderr)
            sys.exit(1)
        print(summary)


def identifiers(expr):
    """The bare identifiers of a PromQL expression: metric names, functions, keywords."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals (label values, regexes)
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers: their names are labels
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range and subquery durations
    expr = re.sub(r"\$\{?\w+\}?", "", expr)  # Grafana variables
    expr = re.sub(r"\b\d+(\.\d+)?(e[+-]?\d+)?[smhdwy]?\b", "", expr)  # numbers, durations
    return re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr)


def metric_problems(where, expr, problems):
    used = set()
    for ident in identifiers(expr):
        if ident in PROMQL_WORDS:
            continue
        base = re.sub(r"_(bucket|sum|count)$", "", ident)
        if ident in METRICS:
            used.add(ident)
        elif base in HISTOGRAMS:
            used.add(base)
        else:
            problems.add(where, f"`{ident}` is not a landfall metric (nor a PromQL word) in `{expr}`")
    return used


def dashboard_targets(dash):
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            yield panel, target


def check_metrics():
    problems = Problems()
    used = set()

    alerts_path = ROOT / "deploy/prometheus/alerts.yml"
    rules = [r for g in yaml.safe_load(alerts_path.read_text())["groups"] for r in g["rules"]]
    for rule in rules:
        name = rule.get("alert") or rule.get("record")
        used |= metric_problems(f"alerts.yml {name}", rule["expr"], problems)
        if "runbook_url" not in rule.get("annotations", {}):
            problems.add(f"alerts.yml {name}", "no runbook_url annotation")
        anchor = rule.get("annotations", {}).get("runbook_url", "").rpartition("#")[2]
        if anchor and anchor != name.lower():
            problems.add(f"alerts.yml {name}", f"runbook_url anchor #{anchor} is not #{name.lower()}")

    # Every alert has a unit test in which it fires, and fires with a `stream` label.
    tests = yaml.safe_load((ROOT / "deploy/prometheus/alerts_test.yml").read_text())["tests"]
    fired = {}
    for test in tests:
        for case in test.get("alert_rule_test", []):
            for alert in case.get("exp_alerts") or []:
                fired.setdefault(case["alertname"], []).append(alert.get("exp_labels", {}))
    for rule in rules:
        name = rule.get("alert")
        if not name:
            continue
        if name not in fired:
            problems.add("alerts_test.yml", f"no test where {name} fires")
        elif not all("stream" in labels for labels in fired[name]):
            problems.add("alerts_test.yml", f"{name} is expected to fire without a `stream` label")

    dash = json.loads((ROOT / "deploy/grafana/landfall.json").read_text())
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    if variables.get("datasource", {}).get("type") != "datasource" or variables["datasource"].get("query") != "prometheus":
        problems.add("landfall.json", "no Prometheus datasource variable `datasource`")
    stream_var = variables.get("stream", {})
    if stream_var.get("type") != "query":
        problems.add("landfall.json", "no query variable `stream`")
    else:
        # label_values(<selector>, <label>): the second argument is a label name.
        query = re.sub(r",\s*\w+\s*\)$", ")", stream_var["definition"])
        used |= metric_problems("landfall.json variable stream", query, problems)
    ids = set()
    cells = {}
    for panel in dash["panels"]:
        where = f"landfall.json panel {panel.get('id')} `{panel.get('title')}`"
        if panel.get("id") in ids:
            problems.add(where, "duplicate panel id")
        ids.add(panel.get("id"))
        g = panel["gridPos"]
        if g["x"] + g["w"] > 24:
            problems.add(where, "wider than the 24-column grid")
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    problems.add(where, f"overlaps panel {cells[(x, y)]}")
                    break
                cells[(x, y)] = panel.get("id")
            else:
                continue
            break
        if panel["type"] != "row" and panel.get("datasource", {}).get("uid") != "${datasource}":
            problems.add(where, "datasource is not the ${datasource} variable")
    for panel, target in dashboard_targets(dash):
        where = f"landfall.json panel `{panel['title']}` {target['refId']}"
        expr = target["expr"]
        used |= metric_problems(where, expr, problems)
        if target.get("datasource", {}).get("uid") != "${datasource}":
            problems.add(where, "datasource is not the ${datasource} variable")
        # Every selector honours the stream picker.
        for selector in re.findall(r"landfall_\w+(\{[^}]*\})?", expr):
            if 'stream=~"$stream"' not in selector:
                problems.add(where, f"a selector without stream=~\"$stream\" in `{expr}`")
    # docs/operations.md explains each alert (the runbook_url anchors) and each metric.
    ops = (ROOT / "docs/operations.md").read_text()
    headings = {m.lower() for m in re.findall(r"^#+ (\w+)\s*$", ops, re.M)}
    for rule in rules:
        if rule.get("alert") and rule["alert"].lower() not in headings:
            problems.add("docs/operations.md", f"no section `{rule['alert']}` (the alert's runbook_url)")
    for metric in sorted(METRICS):
        if f"`{metric}" not in ops:
            problems.add("docs/operations.md", f"{metric} is not explained")

    unused = METRICS - used
    if unused:
        problems.add("dashboard and alerts", f"metrics shown nowhere: {', '.join(sorted(unused))}")
    problems.finish(
        f"metrics: {len(rules)} alert rules and {sum(1 for _ in dashboard_targets(dash))} dashboard "
        f"queries use only landfall's {len(METRICS)} metrics, every one of them; every alert fires "
        f"in a unit test with its stream label"
    )


def write_promql_rules(out):
    """The dashboard's queries as recording rules, Grafana's variables made concrete."""
    dash = json.loads((ROOT / "deploy/grafana/landfall.json").read_text())
    rules = []
    for i, (panel, target) in enumerate(dashboard_targets(dash)):
        expr = (target["expr"].replace("$__rate_interval", "5m").replace("$__range", "6h")
                .replace("$stream", ".*"))
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    Path(out).write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    print(f"promql: {len(rules)} dashboard queries written to {out}")


def documented_config_keys():
    """Key paths docs/configuration.md documents, as tuples with `*` for a <name> level."""
    keys = set()
    section = None
    for line in (ROOT / "docs/configuration.md").read_text().splitlines():
        heading = re.match(r"#+ `\[([^\]]+)\]`", line)
        if heading:
            section = tuple("*" if p.startswith("<") else p for p in heading.group(1).split("."))
            continue
        if section and line.startswith("| `"):
            first_cell = line.split("|")[1]
            for key in re.findall(r"`([^`]+)`", first_cell):
                keys.add(section + tuple(key.split(".")))
    return keys


def config_key_problems(toml_text, where, problems):
    documented = documented_config_keys()
    if not documented:
        problems.add("docs/configuration.md", "no documented keys found (has its layout changed?)")
        return

    def allowed(path):
        return any(len(k) == len(path) and all(a in ("*", b) for a, b in zip(k, path)) for k in documented)

    def prefix_of_documented(path):
        return any(len(k) > len(path) and all(a in ("*", b) for a, b in zip(k, path)) for k in documented)

    def walk(table, path):
        for key, value in table.items():
            p = path + (key,)
            if allowed(p):
                continue
            if isinstance(value, dict) and prefix_of_documented(p):
                walk(value, p)
            else:
                problems.add(where, f"key `{'.'.join(p)}` is not in docs/configuration.md")

    try:
        config = tomllib.loads(toml_text)
    except tomllib.TOMLDecodeError as e:
        problems.add(where, f"not valid TOML: {e}")
        return None
    walk(config, ())
    return config


def check_kubernetes():
    problems = Problems()
    kdir = ROOT / "deploy/kubernetes"
    objects = {}
    manifests = sorted(p for p in kdir.glob("*.yaml") if p.name != "kustomization.yaml")
    for path in manifests:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                objects[(doc["kind"], doc["metadata"]["name"])] = doc

    kustomization = yaml.safe_load((kdir / "kustomization.yaml").read_text())
    listed = set(kustomization.get("resources", []))
    present = {p.name for p in manifests}
    if listed != present:
        problems.add("kustomization.yaml", f"resources {sorted(listed)} differ from the manifests {sorted(present)}")

    def get(kind, name):
        obj = objects.get((kind, name))
        if obj is None:
            problems.add("deploy/kubernetes", f"no {kind} {name}")
        return obj

    sts = get("StatefulSet", "landfall")
    services = {n: o for (k, n), o in objects.items() if k == "Service"}
    monitor = get("ServiceMonitor", "landfall")
    if sts is None:
        problems.finish("")
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    pod_labels = spec["template"]["metadata"]["labels"]
    container = next((c for c in pod["containers"] if c["name"] == "landfall"), None)
    if container is None:
        problems.add("statefulset.yaml", "no container named landfall")
        problems.finish("")

    def selects(selector, labels):
        return all(labels.get(k) == v for k, v in selector.items())

    if not selects(spec["selector"]["matchLabels"], pod_labels):
        problems.add("statefulset.yaml", "selector does not match the pod template's labels")

    # The governing Service: headless, selecting these pods.
    headless = services.get(spec.get("serviceName"))
    if headless is None:
        problems.add("statefulset.yaml", f"serviceName {spec.get('serviceName')} is no Service here")
    elif headless["spec"].get("clusterIP") != "None" or not selects(headless["spec"]["selector"], pod_labels):
        problems.add("service.yaml", f"{spec['serviceName']} is not headless over the StatefulSet's pods")

    # Sharding: --shard auto with LANDFALL_SHARDS equal to the replicas.
    args = container.get("args", [])
    if args[:1] != ["run"] or "--shard" not in args or args[args.index("--shard") + 1] != "auto":
        problems.add("statefulset.yaml", f"args {args} are not `run ... --shard auto`")
    env = {e["name"]: e for e in container.get("env", [])}
    shards = env.get("LANDFALL_SHARDS", {}).get("value")
    if shards != str(spec.get("replicas")):
        problems.add("statefulset.yaml", f"LANDFALL_SHARDS {shards!r} differs from replicas {spec.get('replicas')}")
    config_path = args[args.index("--config") + 1] if "--config" in args else None

    # Secret references resolve.
    for name, e in env.items():
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            secret = get("Secret", ref["name"])
            if secret is not None and ref["key"] not in {**secret.get("stringData", {}), **secret.get("data", {})}:
                problems.add("statefulset.yaml", f"env {name}: Secret {ref['name']} has no key {ref['key']}")

    # Ports and probes.
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    if ports.get("http") != 8686:
        problems.add("statefulset.yaml", "no container port 8686 named http")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        got = container.get(probe, {}).get("httpGet", {})
        if got.get("path") != path or got.get("port") not in ("http", 8686):
            problems.add("statefulset.yaml", f"{probe} is not GET {path} on port http")

    # Security context.
    psc, csc = pod.get("securityContext", {}), container.get("securityContext", {})
    if not psc.get("runAsNonRoot") and not csc.get("runAsNonRoot"):
        problems.add("statefulset.yaml", "runAsNonRoot is not set")
    if not csc.get("readOnlyRootFilesystem"):
        problems.add("statefulset.yaml", "readOnlyRootFilesystem is not set")
    if csc.get("capabilities", {}).get("drop") != ["ALL"]:
        problems.add("statefulset.yaml", "capabilities do not drop ALL")
    if csc.get("allowPrivilegeEscalation") is not False:
        problems.add("statefulset.yaml", "allowPrivilegeEscalation is not false")
    if "requests" not in container.get("resources", {}) or "limits" not in container.get("resources", {}):
        problems.add("statefulset.yaml", "resources lack requests or limits")

    # Volumes: every mount is backed, the state by a claim template, the config by the ConfigMap.
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", [])}
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    for path, name in mounts.items():
        if name not in volumes and name not in claims:
            problems.add("statefulset.yaml", f"volumeMount {name} at {path} has no volume")
    state_mount = next((p for p, n in mounts.items() if n in claims), None)
    if state_mount is None:
        problems.add("statefulset.yaml", "no volumeClaimTemplates volume mounted (state)")
    config_mount = next((p for p, n in mounts.items() if "configMap" in volumes.get(n, {})), None)
    config_map = None
    if config_mount is None:
        problems.add("statefulset.yaml", "no ConfigMap mounted")
    else:
        cm_name = volumes[mounts[config_mount]]["configMap"]["name"]
        config_map = get("ConfigMap", cm_name)
        if config_path and config_map is not None:
            key = config_path.removeprefix(config_mount.rstrip("/") + "/")
            if key == config_path or key not in config_map["data"]:
                problems.add("statefulset.yaml", f"--config {config_path} is not a key of ConfigMap {cm_name} mounted at {config_mount}")

    # The config itself: documented keys only, listening beyond loopback on the probed port,
    # state on the replica's volume.
    toml_text = (config_map or {}).get("data", {}).get("landfall.toml")
    if toml_text is None:
        problems.add("configmap.yaml", "no landfall.toml")
    else:
        config = config_key_problems(toml_text, "configmap.yaml landfall.toml", problems)
        if config is not None:
            server = config.get("server", {})
            if server.get("listen") != "0.0.0.0:8686":
                problems.add("configmap.yaml landfall.toml", 'server.listen is not "0.0.0.0:8686"')
            if state_mount and not str(server.get("state_dir", "")).startswith(state_mount.rstrip("/") + "/"):
                problems.add("configmap.yaml landfall.toml", f"server.state_dir is not on the state volume ({state_mount})")
            if not any(str(s.get("source", "")).startswith("s3://") for s in config.get("streams", {}).values()):
                problems.add("configmap.yaml landfall.toml", "no S3 stream")

    # The metrics Service selects the pods, the ServiceMonitor selects the metrics Service, and
    # their ports line up. ServiceMonitor is a CRD kubernetes-validate has no schema for: its
    # structure is checked here.
    if monitor is not None:
        if monitor.get("apiVersion") != "monitoring.coreos.com/v1":
            problems.add("servicemonitor.yaml", f"apiVersion {monitor.get('apiVersion')} is not monitoring.coreos.com/v1")
        mspec = monitor.get("spec", {})
        allowed = {"selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels", "podTargetLabels", "sampleLimit"}
        if set(mspec) - allowed:
            problems.add("servicemonitor.yaml", f"unknown spec fields {sorted(set(mspec) - allowed)}")
        match = mspec.get("selector", {}).get("matchLabels", {})
        selected = [n for n, s in services.items() if match and selects(match, s["metadata"].get("labels", {}))]
        if len(selected) != 1:
            problems.add("servicemonitor.yaml", f"selects {len(selected)} Services ({selected}), not exactly one")
        endpoints = mspec.get("endpoints") or []
        if not endpoints:
            problems.add("servicemonitor.yaml", "no endpoints")
        endpoint_fields = {"port", "path", "interval", "scrapeTimeout", "scheme", "honorLabels", "relabelings", "metricRelabelings"}
        for ep in endpoints:
            if set(ep) - endpoint_fields:
                problems.add("servicemonitor.yaml", f"unknown endpoint fields {sorted(set(ep) - endpoint_fields)}")
            if ep.get("path", "/metrics") != "/metrics":
                problems.add("servicemonitor.yaml", f"endpoint path {ep.get('path')} is not /metrics")
            for name in selected:
                svc_ports = {p.get("name"): p for p in services[name]["spec"]["ports"]}
                if ep.get("port") not in svc_ports:
                    problems.add("servicemonitor.yaml", f"port {ep.get('port')} is not a named port of Service {name}")
                elif svc_ports[ep["port"]].get("targetPort") not in ("http", 8686):
                    problems.add("service.yaml", f"{name} port {ep['port']} does not target the container's http port")
        for name in selected:
            if not selects(services[name]["spec"]["selector"], pod_labels):
                problems.add("service.yaml", f"{name} does not select the StatefulSet's pods")
    problems.finish(
        f"kubernetes: {len(objects)} objects reference each other consistently; LANDFALL_SHARDS = "
        f"replicas = {spec.get('replicas')}; ServiceMonitor structure ok; the ConfigMap's "
        f"landfall.toml uses only keys of docs/configuration.md"
    )


def check_dockerfile():
    problems = Problems()
    text = (ROOT / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (crates/[^/\s]+/Cargo\.toml) ", text, re.M))
    crates = {str(p.relative_to(ROOT)) for p in ROOT.glob("crates/*/Cargo.toml")}
    for missing in sorted(crates - copied):
        problems.add("Dockerfile", f"the dependency layer does not copy {missing} (the build would lack that crate)")
    for extra in sorted(copied - crates):
        problems.add("Dockerfile", f"copies {extra}, which does not exist")
    problems.finish(f"dockerfile: the dependency layer copies all {len(crates)} crate manifests")


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "metrics":
        check_metrics()
    elif command == "promql" and len(sys.argv) == 3:
        write_promql_rules(sys.argv[2])
    elif command == "kubernetes":
        check_kubernetes()
    elif command == "dockerfile":
        check_dockerfile()
    else:
        sys.exit(__doc__)
