"""Test helper: Azurite Blob and Queue through Azure's own Python SDK (an independent client).

Used by crates/landfall/tests/notifications.rs. Every command prints one JSON object.

  azurite.py BLOB_URL QUEUE_URL mkqueue QUEUE                      create a queue
  azurite.py BLOB_URL QUEUE_URL put CONTAINER NAME FILE            upload a blob: etag, size
  azurite.py BLOB_URL QUEUE_URL send QUEUE BODY_FILE               enqueue the file's text as is
  azurite.py BLOB_URL QUEUE_URL peek QUEUE                         approximate message count
  azurite.py BLOB_URL QUEUE_URL putmany CONTAINER QUEUE SPEC_FILE  upload [[name, text], ...] and
                                                                  enqueue a BlobCreated event for
                                                                  each, as Event Grid would
"""
import json
import sys
import urllib.parse
import uuid

from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def conn(blob, queue):
    return (f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};"
            f"BlobEndpoint={blob}/devstoreaccount1;QueueEndpoint={queue}/devstoreaccount1;")


def main(argv):
    blob, queue, cmd, args = argv[0], argv[1], argv[2], argv[3:]
    c = conn(blob, queue)
    if cmd == "mkqueue":
        QueueClient.from_connection_string(c, args[0]).create_queue()
        print("{}")
    elif cmd == "put":
        container, name, path = args
        svc = BlobServiceClient.from_connection_string(c)
        try:
            svc.create_container(container)
        except Exception:
            pass
        data = open(path, "rb").read()
        r = svc.get_blob_client(container, name).upload_blob(data, overwrite=True)
        print(json.dumps({"etag": r["etag"].strip('"'), "size": len(data)}))
    elif cmd == "send":
        q, path = args
        QueueClient.from_connection_string(c, q).send_message(open(path).read())
        print("{}")
    elif cmd == "putmany":
        container, q, path = args
        svc = BlobServiceClient.from_connection_string(c)
        try:
            svc.create_container(container)
        except Exception:
            pass
        queue_client = QueueClient.from_connection_string(c, q)
        for name, text in json.load(open(path)):
            data = text.encode()
            r = svc.get_blob_client(container, name).upload_blob(data, overwrite=True)
            url = ("https://devstoreaccount1.blob.core.windows.net/" + container + "/"
                   + urllib.parse.quote(name, safe="/-._~"))
            event = {
                "topic": "/subscriptions/0/resourceGroups/landfall/providers/Microsoft.Storage/storageAccounts/devstoreaccount1",
                "subject": f"/blobServices/default/containers/{container}/blobs/{name}",
                "eventType": "Microsoft.Storage.BlobCreated", "eventTime": "2026-12-02T12:00:00Z",
                "id": str(uuid.uuid4()), "dataVersion": "", "metadataVersion": "1",
                "data": {"api": "PutBlob", "url": url, "contentLength": len(data),
                         "eTag": r["etag"].strip('"'), "blobType": "BlockBlob"},
            }
            queue_client.send_message(json.dumps(event))
        print("{}")
    elif cmd == "peek":
        p = QueueClient.from_connection_string(c, args[0]).get_queue_properties()
        print(json.dumps({"count": p.approximate_message_count}))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv[1:])
