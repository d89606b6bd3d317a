#!/usr/bin/env python3
"""Prepare the emulators for the test suite: the S3 bucket on moto, the blob container on Azurite
and the GCS bucket on fake-gcs-server that the cloud integration tests write under (each test
uses its own prefix).

  emulators.py prepare --s3 http://127.0.0.1:5000 --azure http://127.0.0.1:10000/devstoreaccount1 \
      --gcs http://127.0.0.1:4443
"""
import argparse, json, sys, urllib.error, urllib.request

BUCKET = "landfall-test"
CONTAINER = "landfall-test"
GCS_BUCKET = "landfall-test"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def prepare_gcs(gcs):
    """Create the bucket through fake-gcs-server's JSON API (no credentials)."""
    try:
        urllib.request.urlopen(f"{gcs}/storage/v1/b/{GCS_BUCKET}").close()
        return
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise
    req = urllib.request.Request(
        f"{gcs}/storage/v1/b", data=json.dumps({"name": GCS_BUCKET}).encode(),
        headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(req).close()


def prepare(s3, azure, gcs):
    import boto3
    c = boto3.client("s3", endpoint_url=s3, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
    if BUCKET not in [b["Name"] for b in c.list_buckets().get("Buckets", [])]:
        c.create_bucket(Bucket=BUCKET)
    from azure.storage.blob import BlobServiceClient
    conn = (f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};BlobEndpoint={azure};")
    svc = BlobServiceClient.from_connection_string(conn)
    if not any(x.name == CONTAINER for x in svc.list_containers()):
        svc.create_container(CONTAINER)
    prepare_gcs(gcs)
    print(f"emulators ready: s3://{BUCKET} on {s3}, az://{CONTAINER} on {azure}, gs://{GCS_BUCKET} on {gcs}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["prepare"])
    ap.add_argument("--s3", required=True)
    ap.add_argument("--azure", required=True)
    ap.add_argument("--gcs", required=True, help="fake-gcs-server base URL (http://127.0.0.1:PORT)")
    a = ap.parse_args()
    prepare(a.s3, a.azure, a.gcs)
