#!/usr/bin/env python3
"""Prepare the emulators for the test suite: the S3 bucket on moto and the blob container on
Azurite that the cloud integration tests write under (each test uses its own prefix).

  emulators.py prepare --s3 http://127.0.0.1:5000 --azure http://127.0.0.1:10000/devstoreaccount1
"""
import argparse, sys

BUCKET = "landfall-test"
CONTAINER = "landfall-test"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def prepare(s3, azure):
    import boto3
    c = boto3.client("s3", endpoint_url=s3, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
    if BUCKET not in [b["Name"] for b in c.list_buckets().get("Buckets", [])]:
        c.create_bucket(Bucket=BUCKET)
    from azure.storage.blob import BlobServiceClient
    conn = (f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};BlobEndpoint={azure};")
    svc = BlobServiceClient.from_connection_string(conn)
    if not any(x.name == CONTAINER for x in svc.list_containers()):
        svc.create_container(CONTAINER)
    print(f"emulators ready: s3://{BUCKET} on {s3}, az://{CONTAINER} on {azure}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["prepare"])
    ap.add_argument("--s3", required=True)
    ap.add_argument("--azure", required=True)
    a = ap.parse_args()
    prepare(a.s3, a.azure)
