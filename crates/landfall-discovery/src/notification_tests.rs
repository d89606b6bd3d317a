//! Recorded-shape payloads from the AWS, Azure and GCS documentation (and moto's quirks).

use super::*;

fn b64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn time(s: &str) -> Option<DateTime<Utc>> {
    Some(DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc))
}

fn s3(bucket: &str) -> StoreRef {
    StoreRef::S3 {
        bucket: bucket.into(),
    }
}

/// An S3 record as AWS documents it (event structure version 2.1).
fn s3_record(event_name: &str, key: &str) -> String {
    format!(
        r#"{{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-west-2",
        "eventTime":"2024-05-06T07:08:09.123Z","eventName":"{event_name}",
        "userIdentity":{{"principalId":"AWS:AIDAJDPLRKLG7UEXAMPLE"}},
        "requestParameters":{{"sourceIPAddress":"127.0.0.1"}},
        "responseElements":{{"x-amz-request-id":"C3D13FE58DE4C810","x-amz-id-2":"FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5JgHvANOjpD"}},
        "s3":{{"s3SchemaVersion":"1.0","configurationId":"landfall-events",
          "bucket":{{"name":"amzn-s3-demo-bucket","ownerIdentity":{{"principalId":"A3NL1KOZZKExample"}},"arn":"arn:aws:s3:::amzn-s3-demo-bucket"}},
          "object":{{"key":"{key}","size":1024,"eTag":"d41d8cd98f00b204e9800998ecf8427e","versionId":"096fKKXTRTtl3on89fVO.nfljtsv6qko","sequencer":"0055AED6DCD90281E5"}}}}}}"#
    )
}

fn s3_message(records: &[String]) -> String {
    format!(r#"{{"Records":[{}]}}"#, records.join(","))
}

#[test]
fn s3_put_event() {
    let body = s3_message(&[s3_record(
        "ObjectCreated:Put",
        "landing/2024/05/06/orders.json",
    )]);
    let events = parse_message(&body).unwrap();
    assert_eq!(
        events,
        vec![StorageEvent {
            kind: EventKind::Created,
            store: s3("amzn-s3-demo-bucket"),
            key: "landing/2024/05/06/orders.json".into(),
            size: Some(1024),
            etag: Some("d41d8cd98f00b204e9800998ecf8427e".into()),
            version: Some("096fKKXTRTtl3on89fVO.nfljtsv6qko".into()),
            sequencer: Some("0055AED6DCD90281E5".into()),
            event_time: time("2024-05-06T07:08:09.123Z"),
        }]
    );
}

#[test]
fn s3_multipart_upload_as_moto_sends_it() {
    // moto: no sequencer, '/' encoded as %2F, a multipart etag, versionId null.
    let body = r#"{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-east-1",
      "eventTime":"2026-11-30T10:00:00.000Z","eventName":"ObjectCreated:CompleteMultipartUpload",
      "s3":{"s3SchemaVersion":"1.0","configurationId":"landfall",
        "bucket":{"name":"landing","arn":"arn:aws:s3:::landing"},
        "object":{"key":"big%2Fpart+one.parquet","size":15728640,
          "eTag":"1f2d3c4b5a6978800112233445566778-3","versionId":null}}}]}"#;
    let events = parse_message(body).unwrap();
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!(e.kind, EventKind::Created);
    assert_eq!(e.key, "big/part one.parquet");
    assert_eq!(e.size, Some(15_728_640));
    assert_eq!(
        e.etag.as_deref(),
        Some("1f2d3c4b5a6978800112233445566778-3")
    );
    assert_eq!((e.version.as_ref(), e.sequencer.as_ref()), (None, None));
}

#[test]
fn s3_key_decoding() {
    for (raw, decoded) in [
        ("with+spaces+in+name.csv", "with spaces in name.csv"),
        ("a%2Bb.csv", "a+b.csv"),
        ("100%25+done.csv", "100% done.csv"),
        (
            "caf%C3%A9/%E6%97%A5%E6%9C%AC%F0%9F%98%80.json",
            "café/日本😀.json",
        ),
        (
            "year%3D2024/month%3D05/day%3D06/part-00000.json",
            "year=2024/month=05/day=06/part-00000.json",
        ),
        (
            "deep%2Fnested%2Fprefix%2Ffile.txt",
            "deep/nested/prefix/file.txt",
        ),
        ("plain", "plain"),
    ] {
        let body = s3_message(&[s3_record("ObjectCreated:Put", raw)]);
        assert_eq!(parse_message(&body).unwrap()[0].key, decoded, "{raw}");
    }
}

#[test]
fn s3_multi_record_kinds() {
    let body = s3_message(&[
        s3_record("ObjectCreated:Put", "a.json"),
        s3_record("ObjectCreated:Copy", "b.json"),
        s3_record("ObjectRemoved:Delete", "c.json"),
        s3_record("ObjectRemoved:DeleteMarkerCreated", "d.json"),
        s3_record("ObjectRestore:Completed", "e.json"),
        s3_record("s3:ObjectCreated:Post", "f.json"),
    ]);
    let kinds: Vec<(EventKind, String)> = parse_message(&body)
        .unwrap()
        .into_iter()
        .map(|e| (e.kind, e.key))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (EventKind::Created, "a.json".into()),
            (EventKind::Created, "b.json".into()),
            (EventKind::Removed, "c.json".into()),
            (EventKind::Removed, "d.json".into()),
            (
                EventKind::Other("ObjectRestore:Completed".into()),
                "e.json".into()
            ),
            (EventKind::Created, "f.json".into()),
        ]
    );
}

#[test]
fn s3_test_event_is_ignored() {
    let body = r#"{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2024-05-06T07:00:00.000Z",
      "Bucket":"amzn-s3-demo-bucket","RequestId":"5582815E1AEA5ADF","HostId":"8cLeGAmw098X5cv4Zkwcmo8vvZa3eH3eKxsPzbB9wrR+YstdA6Knx4Ip8EXAMPLE"}"#;
    assert_eq!(
        parse_notification(body).unwrap(),
        Notification::Ignored(Ignored::S3TestEvent {
            bucket: Some("amzn-s3-demo-bucket".into())
        })
    );
    assert_eq!(parse_message(body).unwrap(), vec![]);
}

fn sns_envelope(message: &str) -> String {
    serde_json::json!({
        "Type": "Notification",
        "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
        "TopicArn": "arn:aws:sns:us-west-2:123456789012:landfall-events",
        "Subject": "Amazon S3 Notification",
        "Message": message,
        "Timestamp": "2024-05-06T07:08:09.500Z",
        "SignatureVersion": "1",
        "Signature": "EXAMPLEpH+DcEwjAPg8O9mY8dReBSwksfg2S7WKQcikcNKWLQjwu6A4VbeS0QHVCkhRS7fUQvi2egU3N858fiTDN6bkkOxYDVrY0Ad8L10Hs3zH81mtnPk5uvvolIC1CXGu43obcgFxeL3khZl8IKvO61GWB6jI9b5+gLPoBc1Q=",
        "SigningCertURL": "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem",
        "UnsubscribeURL": "https://sns.us-west-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-west-2:123456789012:landfall-events:c9135db0"
    })
    .to_string()
}

#[test]
fn sns_not_raw_and_raw() {
    let s3_json = s3_message(&[
        s3_record("ObjectCreated:Put", "in/a+b.csv"),
        s3_record("ObjectCreated:Put", "in/c%2Bd.csv"),
    ]);
    let wrapped = parse_message(&sns_envelope(&s3_json)).unwrap();
    let raw = parse_message(&s3_json).unwrap();
    assert_eq!(wrapped, raw);
    let keys: Vec<&str> = raw.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["in/a b.csv", "in/c+d.csv"]);
}

#[test]
fn sns_test_event_and_confirmations() {
    let test = r#"{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2024-05-06T07:00:00.000Z","Bucket":"b"}"#;
    assert_eq!(
        parse_notification(&sns_envelope(test)).unwrap(),
        Notification::Ignored(Ignored::S3TestEvent {
            bucket: Some("b".into())
        })
    );
    let confirm = r#"{"Type":"SubscriptionConfirmation","MessageId":"165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
      "Token":"2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb71854e285d6ad02428b09ceece29417f1f02d609c582afbacc99c583a916b9981dd2728f4ae6fdb82efd087cc3b7849e05798d2d2785c03b0879594eeac82c01f235d0e717736",
      "TopicArn":"arn:aws:sns:us-west-2:123456789012:landfall-events",
      "Message":"You have chosen to subscribe to the topic arn:aws:sns:us-west-2:123456789012:landfall-events.\nTo confirm the subscription, visit the SubscribeURL included in this message.",
      "SubscribeURL":"https://sns.us-west-2.amazonaws.com/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:us-west-2:123456789012:landfall-events&Token=2336412f37",
      "Timestamp":"2024-05-06T06:59:00.000Z","SignatureVersion":"1","Signature":"EXAMPLE=","SigningCertURL":"https://example.invalid/cert.pem"}"#;
    assert_eq!(
        parse_notification(confirm).unwrap(),
        Notification::Ignored(Ignored::SnsSubscriptionConfirmation)
    );
    let unsub = confirm.replace("SubscriptionConfirmation", "UnsubscribeConfirmation");
    assert_eq!(
        parse_notification(&unsub).unwrap(),
        Notification::Ignored(Ignored::SnsUnsubscribeConfirmation)
    );
}

const TOPIC: &str = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/Storage/providers/Microsoft.Storage/storageAccounts/mystorageacct";

/// `data` of a BlobCreated event as in the Azure docs.
fn blob_data(api: &str, url: &str) -> String {
    format!(
        r#"{{"api":"{api}","clientRequestId":"6d79dbfb-0e37-4fc4-981f-442c9ca65760",
        "requestId":"831e1650-001e-001b-66ab-eeb76e000000","eTag":"0x8D4BCC2E4835CD0",
        "contentType":"text/plain","contentLength":524288,"blobType":"BlockBlob","url":"{url}",
        "sequencer":"00000000000004420000000000028963",
        "storageDiagnostics":{{"batchId":"b68529f3-68cd-4744-baa4-3c0498ec19f0"}}}}"#
    )
}

fn event_grid(event_type: &str, data: &str) -> String {
    format!(
        r#"{{"topic":"{TOPIC}","subject":"/blobServices/default/containers/landing/blobs/new-file.txt",
        "eventType":"{event_type}","eventTime":"2017-06-26T18:41:00.9584103Z",
        "id":"831e1650-001e-001b-66ab-eeb76e069631","data":{data},"dataVersion":"","metadataVersion":"1"}}"#
    )
}

fn cloud_event(event_type: &str, data: &str) -> String {
    format!(
        r#"{{"source":"{TOPIC}","subject":"/blobServices/default/containers/landing/blobs/new-file.txt",
        "type":"{event_type}","time":"2017-06-26T18:41:00.9584103Z",
        "id":"831e1650-001e-001b-66ab-eeb76e069631","data":{data},"specversion":"1.0"}}"#
    )
}

fn azure_created(key: &str, size: Option<u64>) -> StorageEvent {
    StorageEvent {
        kind: EventKind::Created,
        store: StoreRef::Azure {
            account: "mystorageacct".into(),
            container: "landing".into(),
        },
        key: key.into(),
        size,
        etag: Some("0x8D4BCC2E4835CD0".into()),
        version: None,
        sequencer: Some("00000000000004420000000000028963".into()),
        event_time: time("2017-06-26T18:41:00.9584103Z"),
    }
}

const URL: &str = "https://mystorageacct.blob.core.windows.net/landing/new-file.txt";

#[test]
fn event_grid_and_cloud_events_raw_and_base64() {
    let data = blob_data("PutBlockList", URL);
    let grid = event_grid("Microsoft.Storage.BlobCreated", &data);
    let cloud = cloud_event("Microsoft.Storage.BlobCreated", &data);
    let expected = vec![azure_created("new-file.txt", Some(524_288))];
    for body in [
        format!("[{grid}]"),
        grid.clone(),
        cloud.clone(),
        format!("[{cloud}]"),
    ] {
        assert_eq!(parse_message(&body).unwrap(), expected, "{body}");
        assert_eq!(
            parse_message(&b64(body.as_bytes())).unwrap(),
            expected,
            "base64 {body}"
        );
    }
    let two = format!(
        "[{grid},{}]",
        event_grid("Microsoft.Storage.BlobCreated", &data)
    );
    assert_eq!(parse_message(&two).unwrap().len(), 2);
}

#[test]
fn azure_apis_and_deletes() {
    for (event_type, api, kind) in [
        (
            "Microsoft.Storage.BlobCreated",
            "PutBlob",
            EventKind::Created,
        ),
        (
            "Microsoft.Storage.BlobCreated",
            "CopyBlob",
            EventKind::Created,
        ),
        (
            "Microsoft.Storage.BlobCreated",
            "FlushWithClose",
            EventKind::Created,
        ),
        (
            "Microsoft.Storage.BlobCreated",
            "CreateFile",
            EventKind::Other("BlobCreated:CreateFile".into()),
        ),
        (
            "Microsoft.Storage.BlobDeleted",
            "DeleteBlob",
            EventKind::Removed,
        ),
        (
            "Microsoft.Storage.BlobTierChanged",
            "SetBlobTier",
            EventKind::Other("Microsoft.Storage.BlobTierChanged".into()),
        ),
    ] {
        let body = event_grid(event_type, &blob_data(api, URL));
        assert_eq!(
            parse_message(&body).unwrap()[0].kind,
            kind,
            "{event_type} {api}"
        );
    }
    // A BlobDeleted event as documented: no contentLength.
    let deleted = r#"{"api":"DeleteBlob","requestId":"4c2359fe-001e-00ba-0e04-585868000000",
      "contentType":"text/plain","blobType":"BlockBlob","url":"https://mystorageacct.blob.core.windows.net/landing/old.txt",
      "sequencer":"0000000000000281000000000002F5CA"}"#;
    let e = &parse_message(&cloud_event("Microsoft.Storage.BlobDeleted", deleted)).unwrap()[0];
    assert_eq!(
        (&e.kind, e.key.as_str(), e.size),
        (&EventKind::Removed, "old.txt", None)
    );
}

#[test]
fn cloud_event_data_base64_and_grid_validation() {
    let data = b64(blob_data("PutBlob", URL).as_bytes());
    let cloud = cloud_event("Microsoft.Storage.BlobCreated", "0")
        .replace(r#""data":0"#, &format!(r#""data_base64":"{data}""#));
    assert_eq!(parse_message(&cloud).unwrap()[0].key, "new-file.txt");
    let bad = cloud.replace(&data, "%%%");
    assert!(matches!(
        err(&bad),
        MessageError::BadBase64 {
            context: "CloudEvents data_base64",
            ..
        }
    ));
    let validation = event_grid(
        "Microsoft.EventGrid.SubscriptionValidationEvent",
        r#"{"validationCode":"512d38b6-c7b8-40c8-89fe-f46f9e9622b6"}"#,
    );
    assert_eq!(
        parse_notification(&format!("[{validation}]")).unwrap(),
        Notification::Ignored(Ignored::EventGridValidation)
    );
}

#[test]
fn azure_keys_from_urls() {
    let acct = |a: &str, c: &str| StoreRef::Azure {
        account: a.into(),
        container: c.into(),
    };
    for (url, store, key) in [
        (
            "https://mystorageacct.blob.core.windows.net/landing/dir/sub/my%20file+v1%25.csv",
            acct("mystorageacct", "landing"),
            "dir/sub/my file+v1%.csv",
        ),
        (
            "https://mystorageacct.dfs.core.windows.net/lake/raw/caf%C3%A9/%E6%97%A5%E6%9C%AC.json",
            acct("mystorageacct", "lake"),
            "raw/café/日本.json",
        ),
        (
            "http://127.0.0.1:10000/devstoreaccount1/landing/year=2024/a%2Bb.json",
            acct("devstoreaccount1", "landing"),
            "year=2024/a+b.json",
        ),
        (
            "http://azurite:10000/devstoreaccount1/c/x.json?sv=1",
            acct("devstoreaccount1", "c"),
            "x.json",
        ),
    ] {
        let e = &parse_message(&event_grid(
            "Microsoft.Storage.BlobCreated",
            &blob_data("PutBlob", url),
        ))
        .unwrap()[0];
        assert_eq!((&e.store, e.key.as_str()), (&store, key), "{url}");
    }
}

fn gcs_attributes(event_type: &str) -> String {
    format!(
        r#"{{"notificationConfig":"projects/_/buckets/my-bucket/notificationConfigs/1",
        "eventType":"{event_type}","payloadFormat":"JSON_API_V1","bucketId":"my-bucket",
        "objectId":"exports/2024 05/données+1.json","objectGeneration":"1715000000123456",
        "eventTime":"2024-05-06T07:08:09.654321Z"}}"#
    )
}

const GCS_OBJECT: &str = r#"{"kind":"storage#object",
  "id":"my-bucket/exports/2024 05/données+1.json/1715000000123456",
  "selfLink":"https://www.googleapis.com/storage/v1/b/my-bucket/o/exports%2F2024%2005%2Fdonn%C3%A9es+1.json",
  "name":"exports/2024 05/données+1.json","bucket":"my-bucket","generation":"1715000000123456",
  "metageneration":"1","contentType":"application/json","timeCreated":"2024-05-06T07:08:09.600Z",
  "updated":"2024-05-06T07:08:09.600Z","storageClass":"STANDARD","size":"2048",
  "md5Hash":"1B2M2Y8AsgTpgAmY7PhCfg==","crc32c":"AAAAAA==","etag":"CIDs8Y2Ih4YDEAE="}"#;

#[test]
fn gcs_pubsub_push_and_bare() {
    let data = b64(GCS_OBJECT.as_bytes());
    let push = format!(
        r#"{{"message":{{"attributes":{},"data":"{data}","messageId":"2070443601311540",
        "message_id":"2070443601311540","publishTime":"2024-05-06T07:08:10.1Z"}},
        "subscription":"projects/my-project/subscriptions/landfall"}}"#,
        gcs_attributes("OBJECT_FINALIZE")
    );
    let expected = StorageEvent {
        kind: EventKind::Created,
        store: StoreRef::Gcs {
            bucket: "my-bucket".into(),
        },
        key: "exports/2024 05/données+1.json".into(),
        size: Some(2048),
        etag: Some("CIDs8Y2Ih4YDEAE=".into()),
        version: Some("1715000000123456".into()),
        sequencer: None,
        event_time: time("2024-05-06T07:08:09.654321Z"),
    };
    assert_eq!(parse_message(&push).unwrap(), vec![expected.clone()]);
    let bare = format!(
        r#"{{"attributes":{},"data":"{data}"}}"#,
        gcs_attributes("OBJECT_FINALIZE")
    );
    assert_eq!(parse_message(&bare).unwrap(), vec![expected]);

    let delete = format!(
        r#"{{"attributes":{},"data":"{data}"}}"#,
        gcs_attributes("OBJECT_DELETE")
    );
    assert_eq!(parse_message(&delete).unwrap()[0].kind, EventKind::Removed);
    let archive = format!(r#"{{"attributes":{}}}"#, gcs_attributes("OBJECT_ARCHIVE"));
    let e = &parse_message(&archive).unwrap()[0];
    assert_eq!(
        (&e.kind, e.size),
        (&EventKind::Other("OBJECT_ARCHIVE".into()), None)
    );
}

fn err(body: &str) -> MessageError {
    parse_message(body).expect_err(body)
}

#[test]
fn malformed_messages() {
    assert!(matches!(
        err("this is not json"),
        MessageError::NotJson {
            context: "message body",
            ..
        }
    ));
    assert!(matches!(
        err("{\"Records\":[{"),
        MessageError::NotJson { .. }
    ));
    assert!(matches!(err(""), MessageError::NotJson { .. }));
    // Base64 of something that is not JSON.
    let not_json = b64(b"hello there");
    assert!(matches!(
        err(&not_json),
        MessageError::NotJson {
            context: "base64-decoded message body",
            ..
        }
    ));
    for other in [
        r#"{"hello":"world"}"#,
        "[1,2]",
        "[]",
        "42",
        "null",
        r#""Records""#,
    ] {
        assert!(
            matches!(err(other), MessageError::UnknownSchema { .. }),
            "{other}"
        );
    }
    match err(r#"{"foo":1,"bar":[2]}"#) {
        MessageError::UnknownSchema { shape } => {
            assert!(shape.starts_with("object with keys ["), "{shape}");
            assert!(shape.contains("foo") && shape.contains("bar"), "{shape}");
        }
        other => panic!("{other:?}"),
    }
    let no_key = s3_message(&[s3_record("ObjectCreated:Put", "k")]).replace(r#""key":"k","#, "");
    assert_eq!(
        err(&no_key),
        MessageError::MissingField {
            schema: "S3",
            field: "s3.object.key"
        }
    );
    let numeric_key = s3_message(&[s3_record("ObjectCreated:Put", "k")]).replace(r#""k""#, "7");
    assert!(matches!(
        err(&numeric_key),
        MessageError::MissingField {
            field: "s3.object.key",
            ..
        }
    ));
    let no_url = event_grid("Microsoft.Storage.BlobCreated", r#"{"api":"PutBlob"}"#);
    assert_eq!(
        err(&no_url),
        MessageError::MissingField {
            schema: "Event Grid",
            field: "data.url"
        }
    );
    let no_api = event_grid(
        "Microsoft.Storage.BlobCreated",
        &format!(r#"{{"url":"{URL}"}}"#),
    );
    assert!(matches!(
        err(&no_api),
        MessageError::MissingField {
            field: "data.api",
            ..
        }
    ));
    let no_object = r#"{"attributes":{"eventType":"OBJECT_FINALIZE","bucketId":"b"}}"#;
    assert!(matches!(
        err(no_object),
        MessageError::MissingField {
            field: "attributes.objectId",
            ..
        }
    ));

    for bad in ["hello", "eyJhIjoxfQ=x", "eyJhIjoxfQ===="] {
        assert!(
            matches!(
                err(bad),
                MessageError::BadBase64 {
                    context: "message body",
                    ..
                }
            ),
            "{bad}"
        );
    }
    let bad_data = format!(
        r#"{{"attributes":{},"data":"not base64!"}}"#,
        gcs_attributes("OBJECT_FINALIZE")
    );
    assert!(matches!(
        err(&bad_data),
        MessageError::BadBase64 {
            context: "Pub/Sub data",
            ..
        }
    ));

    for bad in ["a%2", "%ZZfile", "trailing%", "%FF%FE"] {
        let body = s3_message(&[s3_record("ObjectCreated:Put", bad)]);
        match err(&body) {
            MessageError::BadKeyEncoding { key, .. } => assert_eq!(key, bad),
            other => panic!("{bad}: {other:?}"),
        }
    }
    let bad_url = blob_data("PutBlob", "https://a.blob.core.windows.net/c/bad%zz");
    assert!(matches!(
        err(&event_grid("Microsoft.Storage.BlobCreated", &bad_url)),
        MessageError::BadKeyEncoding { .. }
    ));
    let no_blob = blob_data("PutBlob", "https://a.blob.core.windows.net/c");
    assert!(matches!(
        err(&event_grid("Microsoft.Storage.BlobCreated", &no_blob)),
        MessageError::BadKeyEncoding { .. }
    ));
    let sns_garbage = sns_envelope("not json");
    assert!(matches!(
        err(&sns_garbage),
        MessageError::NotJson {
            context: "SNS Message",
            ..
        }
    ));
}

#[test]
fn errors_never_carry_the_body() {
    let secret = "SECRET-PAYLOAD-".repeat(200);
    let bodies = [
        format!("not json {secret}"),
        format!(r#"{{"unknown":"{secret}"}}"#),
        s3_message(&[s3_record("ObjectCreated:Put", &format!("%ZZ{secret}"))]),
    ];
    for body in bodies {
        let text = err(&body).to_string();
        assert!(text.len() < 400, "{text}");
    }
}

/// xorshift64*: a deterministic stream of pseudo-random numbers without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn random_bytes_and_truncations_never_panic() {
    let grid = event_grid("Microsoft.Storage.BlobCreated", &blob_data("PutBlob", URL));
    let s3_json = s3_message(&[s3_record("ObjectCreated:Put", "a%2Fb+c%25.json")]);
    let gcs = format!(
        r#"{{"attributes":{},"data":"{}"}}"#,
        gcs_attributes("OBJECT_FINALIZE"),
        b64(GCS_OBJECT.as_bytes())
    );
    let valid = [
        s3_json.clone(),
        sns_envelope(&s3_json),
        format!("[{grid}]"),
        b64(grid.as_bytes()),
        cloud_event(
            "Microsoft.Storage.BlobCreated",
            &blob_data("FlushWithClose", URL),
        ),
        event_grid(
            "Microsoft.Storage.BlobRenamed",
            &rename_data(
                "RenameFile",
                "dfs",
                "lake/a%20b/_tmp/x",
                "lake/a%20b/%C3%A9.json",
            ),
        ),
        gcs,
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for body in &valid {
        assert!(!parse_message(body).unwrap().is_empty(), "{body}");
        // Every proper prefix is an error (and never a panic); base64 padding is optional.
        let trimmed = body.trim_end().trim_end_matches('=');
        for cut in 0..trimmed.len() {
            if trimmed.is_char_boundary(cut) {
                assert!(
                    parse_message(&trimmed[..cut]).is_err(),
                    "prefix {cut} of {body}"
                );
            }
        }
        // Random byte edits.
        for _ in 0..2000 {
            let mut bytes = body.clone().into_bytes();
            for _ in 0..=rng.below(4) {
                let at = rng.below(bytes.len());
                match rng.below(3) {
                    0 => bytes[at] = rng.next() as u8,
                    1 => drop(bytes.remove(at)),
                    _ => bytes.insert(at, b"%+\"{}[]=/\\:,0aZ"[rng.below(15)]),
                }
            }
            let _ = parse_message(&String::from_utf8_lossy(&bytes));
        }
    }
    // Pure noise.
    for _ in 0..5000 {
        let len = rng.below(64);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let _ = parse_message(&String::from_utf8_lossy(&bytes));
        let text: String = (0..len)
            .map(|_| b"AZaz09+/=-_ {}[]\"%"[rng.below(18)] as char)
            .collect();
        let _ = parse_message(&text);
    }
}

// ---- ADLS Gen2 and SFTP events, as the Azure docs show them (event-schema-blob-storage) ----

/// The subject Event Grid gives an event about `path` in container `c`.
fn subject(c: &str, path: &str) -> String {
    format!("/blobServices/default/containers/{c}/blobs/{path}")
}

/// An Event Grid schema event with its envelope fields as Azure sends them.
fn grid_event(event_type: &str, subject: &str, data: &str, data_version: &str) -> String {
    format!(
        r#"{{"topic":"{TOPIC}","subject":"{subject}","eventType":"{event_type}",
        "eventTime":"2024-03-01T10:11:12.1234567Z","id":"831e1650-001e-001b-66ab-eeb76e069631",
        "data":{data},"dataVersion":"{data_version}","metadataVersion":"1"}}"#
    )
}

/// A CloudEvents 1.0 event, with `data` as an object or (`base64`) as `data_base64`.
fn cloud(event_type: &str, subject: &str, data: &str, base64: bool) -> String {
    let data = if base64 {
        format!(r#""data_base64":"{}""#, b64(data.as_bytes()))
    } else {
        format!(r#""data":{data}"#)
    };
    format!(
        r#"{{"source":"{TOPIC}","subject":"{subject}","type":"{event_type}",
        "time":"2024-03-01T10:11:12.1234567Z","id":"831e1650-001e-001b-66ab-eeb76e069631",
        {data},"specversion":"1.0"}}"#
    )
}

/// Every shape one event arrives in: Event Grid and CloudEvents (`data` and `data_base64`),
/// alone and in an array, raw and base64-encoded as Event Grid writes to Storage Queues.
fn every_shape(event_type: &str, subject: &str, data: &str, data_version: &str) -> Vec<String> {
    let mut out = Vec::new();
    for event in [
        grid_event(event_type, subject, data, data_version),
        cloud(event_type, subject, data, false),
        cloud(event_type, subject, data, true),
    ] {
        for body in [event.clone(), format!("[{event}]")] {
            out.push(b64(body.as_bytes()));
            out.push(body);
        }
    }
    out
}

fn lake(container: &str) -> StoreRef {
    StoreRef::Azure {
        account: "myaccount".into(),
        container: container.into(),
    }
}

fn event(kind: EventKind, container: &str, key: &str, sequencer: Option<&str>) -> StorageEvent {
    StorageEvent {
        kind,
        store: lake(container),
        key: key.into(),
        size: None,
        etag: None,
        version: None,
        sequencer: sequencer.map(str::to_string),
        event_time: time("2024-03-01T10:11:12.1234567Z"),
    }
}

const SEQ: &str = "00000000000004420000000000028963";

/// `data` of a rename (BlobRenamed or DirectoryRenamed) on the dfs endpoint, as documented.
fn rename_data(api: &str, host: &str, from: &str, to: &str) -> String {
    format!(
        r#"{{"api":"{api}","clientRequestId":"6d79dbfb-0e37-4fc4-981f-442c9ca65760",
        "requestId":"831e1650-001e-001b-66ab-eeb76e000000",
        "destinationUrl":"https://myaccount.{host}.core.windows.net/{to}",
        "sourceUrl":"https://myaccount.{host}.core.windows.net/{from}",
        "sequencer":"{SEQ}",
        "storageDiagnostics":{{"batchId":"b68529f3-68cd-4744-baa4-3c0498ec19f0"}}}}"#
    )
}

#[test]
fn blob_renamed_is_created_at_the_destination_and_removed_at_the_source() {
    // A Spark task's output published by RenameFile, under `landing zone/é/`.
    let from = "lake/landing%20zone/%C3%A9/_temporary/0/part-0.json";
    let to = "lake/landing%20zone/%C3%A9/x.json";
    let expected = vec![
        event(
            EventKind::Created,
            "lake",
            "landing zone/é/x.json",
            Some(SEQ),
        ),
        // The rename's sequencer orders the destination's events, not the source's.
        event(
            EventKind::Removed,
            "lake",
            "landing zone/é/_temporary/0/part-0.json",
            None,
        ),
    ];
    let data = rename_data("RenameFile", "dfs", from, to);
    let subj = subject("lake", "landing zone/é/x.json");
    for body in every_shape("Microsoft.Storage.BlobRenamed", &subj, &data, "1") {
        assert_eq!(parse_message(&body).unwrap(), expected, "{body}");
    }
    // The SFTP rename: the blob endpoint, no clientRequestId, the local user's identity.
    let sftp = r#"{"api":"SftpRename","requestId":"831e1650-001e-001b-66ab-eeb76e000000",
      "destinationUrl":"https://myaccount.blob.core.windows.net/inbox/landing%20zone/%C3%A9/x.json",
      "sourceUrl":"https://myaccount.blob.core.windows.net/inbox/landing%20zone/%C3%A9/x.json.part",
      "sequencer":"00000000000004420000000000028963","identity":"localuser",
      "storageDiagnostics":{"batchId":"b68529f3-68cd-4744-baa4-3c0498ec19f0"}}"#;
    let subj = subject("inbox", "landing zone/é/x.json");
    for body in every_shape("Microsoft.Storage.BlobRenamed", &subj, sftp, "1") {
        assert_eq!(
            parse_message(&body).unwrap(),
            vec![
                event(
                    EventKind::Created,
                    "inbox",
                    "landing zone/é/x.json",
                    Some(SEQ)
                ),
                event(
                    EventKind::Removed,
                    "inbox",
                    "landing zone/é/x.json.part",
                    None
                ),
            ],
            "{body}"
        );
    }
}

#[test]
fn sftp_commit_is_created_and_sftp_create_is_not() {
    // As documented: dataVersion 3, no clientRequestId, contentOffset, the local user.
    let data = |api: &str, length: u64| {
        format!(
            r#"{{"api":"{api}","requestId":"831e1650-001e-001b-66ab-eeb76e000000",
            "eTag":"\"0x8D4BCC2E4835CD0\"","contentType":"application/octet-stream",
            "contentLength":{length},"contentOffset":0,"blobType":"BlockBlob",
            "url":"https://myaccount.blob.core.windows.net/inbox/landing%20zone/%C3%A9/x.json",
            "sequencer":"{SEQ}","identity":"localuser",
            "storageDiagnostics":{{"batchId":"b68529f3-68cd-4744-baa4-3c0498ec19f0"}}}}"#
        )
    };
    let subj = subject("inbox", "landing zone/é/x.json");
    let committed = |size: Option<u64>| StorageEvent {
        size,
        etag: Some("\"0x8D4BCC2E4835CD0\"".into()),
        ..event(
            EventKind::Created,
            "inbox",
            "landing zone/é/x.json",
            Some(SEQ),
        )
    };
    let created = "Microsoft.Storage.BlobCreated";
    for body in every_shape(created, &subj, &data("SftpCommit", 2048), "3") {
        assert_eq!(parse_message(&body).unwrap(), vec![committed(Some(2048))]);
    }
    // The documented sample reports 0 bytes for a committed upload: a HEAD reads the size.
    for body in every_shape(created, &subj, &data("SftpCommit", 0), "3") {
        assert_eq!(parse_message(&body).unwrap(), vec![committed(None)]);
    }
    // The empty blob an SFTP `put` opens first is not a file yet.
    for body in every_shape(created, &subj, &data("SftpCreate", 0), "3") {
        assert_eq!(
            parse_message(&body).unwrap()[0].kind,
            EventKind::Other("BlobCreated:SftpCreate".into())
        );
    }
}

#[test]
fn deletes_by_every_api_are_removed() {
    for (api, host, data_version) in [
        ("DeleteBlob", "blob", ""),
        ("DeleteFile", "dfs", "2"),
        ("SftpRemove", "blob", "2"),
    ] {
        let data = format!(
            r#"{{"api":"{api}","requestId":"4c2359fe-001e-00ba-0e04-585868000000",
            "contentType":"text/plain","blobType":"BlockBlob",
            "url":"https://myaccount.{host}.core.windows.net/lake/landing%20zone/%C3%A9/x.json",
            "sequencer":"0000000000000281000000000002F5CA","identity":"localuser",
            "storageDiagnostics":{{"batchId":"b68529f3-68cd-4744-baa4-3c0498ec19f0"}}}}"#
        );
        let subj = subject("lake", "landing zone/é/x.json");
        for body in every_shape("Microsoft.Storage.BlobDeleted", &subj, &data, data_version) {
            assert_eq!(
                parse_message(&body).unwrap(),
                vec![event(
                    EventKind::Removed,
                    "lake",
                    "landing zone/é/x.json",
                    Some("0000000000000281000000000002F5CA")
                )],
                "{api}: {body}"
            );
        }
    }
}

#[test]
fn directory_events_ask_for_a_listing_or_remove_a_directory() {
    // A Hadoop job commit renaming a task's output directory into place.
    let data = rename_data(
        "RenameDirectory",
        "dfs",
        "lake/landing%20zone/_temporary/0/task_01/%C3%A9",
        "lake/landing%20zone/%C3%A9",
    );
    let subj = subject("lake", "landing zone/é");
    for body in every_shape("Microsoft.Storage.DirectoryRenamed", &subj, &data, "1") {
        assert_eq!(
            parse_message(&body).unwrap(),
            vec![
                event(EventKind::NeedsListing, "lake", "landing zone/é", Some(SEQ)),
                event(
                    EventKind::DirectoryRemoved,
                    "lake",
                    "landing zone/_temporary/0/task_01/é",
                    None
                ),
            ],
            "{body}"
        );
    }
    // The same from SFTP (`rename` of a directory).
    let sftp = rename_data(
        "SftpRename",
        "blob",
        "inbox/upload%20dir",
        "inbox/%C3%A9t%C3%A9",
    );
    let e = parse_message(&cloud(
        "Microsoft.Storage.DirectoryRenamed",
        &subject("inbox", "été"),
        &sftp,
        false,
    ))
    .unwrap();
    assert_eq!(
        (&e[0].kind, e[0].key.as_str(), &e[1].kind, e[1].key.as_str()),
        (
            &EventKind::NeedsListing,
            "été",
            &EventKind::DirectoryRemoved,
            "upload dir"
        )
    );

    let dir_data = |api: &str, recursive: &str| {
        format!(
            r#"{{"api":"{api}","clientRequestId":"6d79dbfb-0e37-4fc4-981f-442c9ca65760",
            "requestId":"831e1650-001e-001b-66ab-eeb76e000000",
            "url":"https://myaccount.dfs.core.windows.net/lake/landing%20zone/%C3%A9"{recursive},
            "sequencer":"{SEQ}",
            "storageDiagnostics":{{"batchId":"b68529f3-68cd-4744-baa4-3c0498ec19f0"}}}}"#
        )
    };
    for body in every_shape(
        "Microsoft.Storage.DirectoryDeleted",
        &subj,
        &dir_data("DeleteDirectory", r#","recursive":"true""#),
        "1",
    ) {
        assert_eq!(
            parse_message(&body).unwrap(),
            vec![event(
                EventKind::DirectoryRemoved,
                "lake",
                "landing zone/é",
                Some(SEQ)
            )]
        );
    }
    // A new directory is empty: nothing to ingest.
    for body in every_shape(
        "Microsoft.Storage.DirectoryCreated",
        &subj,
        &dir_data("CreateDirectory", ""),
        "1",
    ) {
        assert_eq!(
            parse_message(&body).unwrap()[0].kind,
            EventKind::Other("Microsoft.Storage.DirectoryCreated".into())
        );
    }
}

#[test]
fn renames_decode_strictly() {
    let subj = subject("lake", "x.json");
    let renamed = |data: &str| grid_event("Microsoft.Storage.BlobRenamed", &subj, data, "1");
    let no_source = r#"{"api":"RenameFile","destinationUrl":"https://myaccount.dfs.core.windows.net/lake/x.json"}"#;
    assert_eq!(
        err(&renamed(no_source)),
        MessageError::MissingField {
            schema: "Event Grid",
            field: "data.sourceUrl"
        }
    );
    let no_destination =
        r#"{"api":"RenameFile","sourceUrl":"https://myaccount.dfs.core.windows.net/lake/x.json"}"#;
    assert!(matches!(
        err(&cloud(
            "Microsoft.Storage.DirectoryRenamed",
            &subj,
            no_destination,
            true
        )),
        MessageError::MissingField {
            schema: "CloudEvents",
            field: "data.destinationUrl"
        }
    ));
    for (from, to) in [("lake/a%zz", "lake/b"), ("lake/a", "lake/%FF%FE")] {
        let data = rename_data("RenameFile", "dfs", from, to);
        assert!(
            matches!(err(&renamed(&data)), MessageError::BadKeyEncoding { .. }),
            "{from} -> {to}"
        );
    }
    // Path-style (Azurite) URLs name the account in the path.
    let azurite = r#"{"api":"RenameFile",
      "destinationUrl":"http://127.0.0.1:10000/devstoreaccount1/lake/landing%20zone/%C3%A9/x.json",
      "sourceUrl":"http://127.0.0.1:10000/devstoreaccount1/lake/landing%20zone/%C3%A9/_temporary/x.json"}"#;
    let e = parse_message(&renamed(azurite)).unwrap();
    assert_eq!(
        e.iter()
            .map(|e| (&e.kind, &e.store, e.key.as_str()))
            .collect::<Vec<_>>(),
        [
            (
                &EventKind::Created,
                &StoreRef::Azure {
                    account: "devstoreaccount1".into(),
                    container: "lake".into()
                },
                "landing zone/é/x.json"
            ),
            (
                &EventKind::Removed,
                &StoreRef::Azure {
                    account: "devstoreaccount1".into(),
                    container: "lake".into()
                },
                "landing zone/é/_temporary/x.json"
            ),
        ]
    );
}
