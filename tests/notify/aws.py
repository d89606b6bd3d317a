"""Test helper: S3 -> SQS (and S3 -> SNS -> SQS) wiring and event traffic on moto server.

Used by crates/landfall/tests/notifications.rs. Every command prints one JSON object.

  aws.py ENDPOINT wire BUCKET QUEUE PREFIX [--sns] [--raw]  create bucket, queue (and topic),
                                                            bucket notification for PREFIX
  aws.py ENDPOINT mkbucket BUCKET                           create a bucket
  aws.py ENDPOINT mksqs QUEUE                               create an SQS queue (not landfall's)
  aws.py ENDPOINT put BUCKET KEY FILE                       upload FILE's bytes
  aws.py ENDPOINT putmany BUCKET SPEC_FILE                  upload each [key, text] of a JSON list
  aws.py ENDPOINT multipart BUCKET KEY FILE                 upload in a 2-part multipart upload
  aws.py ENDPOINT unwire BUCKET                             remove the bucket's notifications
  aws.py ENDPOINT uploads BUCKET PREFIX                     keys of multipart uploads still open
  aws.py ENDPOINT send QUEUE_URL BODY_FILE                  send one message
  aws.py ENDPOINT drain QUEUE_URL                           every visible event body (hidden 1 s)
  aws.py ENDPOINT peek QUEUE_URL                            approximate messages (visible, in flight)
  aws.py ENDPOINT notification BUCKET                       the bucket's notification configuration
  aws.py ENDPOINT tags QUEUE_URL                            the queue's tags
  aws.py ENDPOINT policy QUEUE_URL                          the queue's access policy (parsed)
  aws.py ENDPOINT topic-policy TOPIC_ARN                    the topic's access policy (parsed)
  aws.py ENDPOINT queue-exists QUEUE_NAME                   whether a queue of that name exists
  aws.py ENDPOINT topics                                    every topic ARN
  aws.py ENDPOINT stale-writer BUCKET SECONDS               read the bucket's notification
                                                            configuration once, then write that
                                                            snapshot back every 50 ms for SECONDS
                                                            (a racing read-modify-write, or a
                                                            Terraform apply, that drops entries
                                                            written meanwhile)
"""
import json
import sys

import boto3


def clients(endpoint):
    kw = dict(endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
              region_name="us-east-1")
    return boto3.client("s3", **kw), boto3.client("sqs", **kw), boto3.client("sns", **kw)


def main(argv):
    endpoint, cmd, args = argv[0], argv[1], argv[2:]
    s3, sqs, sns = clients(endpoint)
    if cmd == "wire":
        bucket, queue, prefix = args[:3]
        use_sns, raw = "--sns" in args, "--raw" in args
        try:
            s3.create_bucket(Bucket=bucket)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        url = sqs.create_queue(QueueName=queue)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        rule = {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix}]}}
        if use_sns:
            topic = sns.create_topic(Name=queue + "-topic")["TopicArn"]
            attrs = {"RawMessageDelivery": "true"} if raw else {}
            sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes=attrs)
            conf = {"TopicConfigurations": [dict(TopicArn=topic, Events=["s3:ObjectCreated:*", "s3:ObjectRemoved:*"], Filter=rule)]}
        else:
            conf = {"QueueConfigurations": [dict(QueueArn=arn, Events=["s3:ObjectCreated:*", "s3:ObjectRemoved:*"], Filter=rule)]}
        s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=conf)
        print(json.dumps({"queue_url": url, "queue_arn": arn}))
    elif cmd == "mksqs":
        print(json.dumps({"queue_url": sqs.create_queue(QueueName=args[0])["QueueUrl"]}))
    elif cmd == "mkbucket":
        s3.create_bucket(Bucket=args[0])
        print("{}")
    elif cmd == "put":
        bucket, key, path = args
        r = s3.put_object(Bucket=bucket, Key=key, Body=open(path, "rb").read())
        print(json.dumps({"etag": r["ETag"]}))
    elif cmd == "putmany":
        bucket, path = args
        for key, body in json.load(open(path)):
            s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
        print("{}")
    elif cmd == "multipart":
        bucket, key, path = args
        data = open(path, "rb").read()
        part = max(5 * 1024 * 1024, (len(data) + 1) // 2)
        mp = s3.create_multipart_upload(Bucket=bucket, Key=key)
        parts = []
        for i, start in enumerate(range(0, len(data), part)):
            r = s3.upload_part(Bucket=bucket, Key=key, UploadId=mp["UploadId"], PartNumber=i + 1,
                               Body=data[start:start + part])
            parts.append({"ETag": r["ETag"], "PartNumber": i + 1})
        r = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=mp["UploadId"],
                                         MultipartUpload={"Parts": parts})
        print(json.dumps({"etag": r["ETag"], "parts": len(parts)}))
    elif cmd == "uploads":
        bucket, prefix = args
        r = s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix)
        print(json.dumps({"uploads": [u["Key"] for u in r.get("Uploads", [])]}))
    elif cmd == "unwire":
        s3.put_bucket_notification_configuration(Bucket=args[0], NotificationConfiguration={})
        print("{}")
    elif cmd == "send":
        url, path = args
        r = sqs.send_message(QueueUrl=url, MessageBody=open(path).read())
        print(json.dumps({"id": r["MessageId"]}))
    elif cmd == "drain":
        # Every visible event body once, left to become visible again after a second.
        out = []
        while True:
            ms = sqs.receive_message(QueueUrl=args[0], MaxNumberOfMessages=10,
                                     VisibilityTimeout=1).get("Messages", [])
            if not ms:
                break
            out += [m["Body"] for m in ms if "Records" in m["Body"]]
        print(json.dumps({"bodies": out}))
    elif cmd == "peek":
        a = sqs.get_queue_attributes(QueueUrl=args[0], AttributeNames=["All"])["Attributes"]
        print(json.dumps({"visible": int(a.get("ApproximateNumberOfMessages", 0)),
                          "in_flight": int(a.get("ApproximateNumberOfMessagesNotVisible", 0))}))
    elif cmd == "notification":
        c = s3.get_bucket_notification_configuration(Bucket=args[0])
        c.pop("ResponseMetadata", None)
        print(json.dumps(c))
    elif cmd == "tags":
        print(json.dumps(sqs.list_queue_tags(QueueUrl=args[0]).get("Tags", {})))
    elif cmd == "policy":
        a = sqs.get_queue_attributes(QueueUrl=args[0], AttributeNames=["Policy"])["Attributes"]
        print(a.get("Policy", "null"))
    elif cmd == "topic-policy":
        a = sns.get_topic_attributes(TopicArn=args[0])["Attributes"]
        print(a.get("Policy", "null"))
    elif cmd == "queue-exists":
        try:
            sqs.get_queue_url(QueueName=args[0])
            print("true")
        except sqs.exceptions.QueueDoesNotExist:
            print("false")
    elif cmd == "topics":
        arns = [t["TopicArn"] for t in sns.list_topics().get("Topics", [])]
        print(json.dumps(arns))
    elif cmd == "stale-writer":
        import time
        bucket, seconds = args[0], float(args[1])
        snapshot = s3.get_bucket_notification_configuration(Bucket=bucket)
        snapshot.pop("ResponseMetadata", None)
        print(json.dumps({"ready": True}), flush=True)
        end, writes = time.monotonic() + seconds, 0
        while time.monotonic() < end:
            s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=snapshot)
            writes += 1
            time.sleep(0.05)
        print(json.dumps({"writes": writes}))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv[1:])
