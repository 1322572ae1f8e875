use crate::*;

fn upper(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    let v = r.value.map(|v| v.to_ascii_uppercase());
    out.emit(&Output {
        key: r.key,
        value: v.as_deref(),
        headers: r.headers.into(),
        ..Output::default()
    })?;
    Ok(())
}

#[test]
fn run_sync() {
    let r = TestRecord::new("in")
        .key("k")
        .value("abc")
        .header("h", Some(b"v"))
        .header("n", None)
        .at(3, 42);
    let res = run(upper, &r);
    assert_eq!(res.status, Status::Ok, "{:?}", res.error);
    assert_eq!(res.outputs.len(), 1);
    let o = &res.outputs[0];
    assert_eq!(
        (
            o.topic.as_str(),
            o.partition,
            o.key.as_deref(),
            o.value.as_deref()
        ),
        ("", None, Some(&b"k"[..]), Some(&b"ABC"[..]))
    );
    assert_eq!(
        o.headers,
        vec![
            OwnedHeader::new("h", Some(b"v")),
            OwnedHeader::new("n", None)
        ]
    );
    let res = run(upper, &TestRecord::new("in"));
    assert_eq!(
        (
            res.status,
            res.outputs[0].key.clone(),
            res.outputs[0].value.clone()
        ),
        (Status::Ok, None, None)
    );
}

#[test]
fn record_fields() {
    fn f(r: &Record, out: &mut Emitter) -> Result<(), Error> {
        let k = r.idempotency_key();
        let attempt = r.attempt.to_string();
        let hs = [Header::new("attempt", Some(attempt.as_bytes()))];
        assert_eq!(r.header("n"), Some(None));
        assert_eq!(r.header("h"), Some(Some(&b"1"[..])));
        assert_eq!(r.header("x"), None);
        out.emit(&Output {
            topic: "side",
            partition: Some(7),
            value: Some(k.as_bytes()),
            headers: (&hs).into(),
            ..Output::default()
        })?;
        Ok(())
    }
    let res = run(
        f,
        &TestRecord::new("orders")
            .at(2, 99)
            .attempt(3)
            .header("h", Some(b"1"))
            .header("n", None),
    );
    assert_eq!(res.status, Status::Ok, "{:?}", res.error);
    let o = &res.outputs[0];
    assert_eq!(
        (o.topic.as_str(), o.partition, o.value.as_deref()),
        ("side", Some(7), Some(&b"orders/2/99"[..]))
    );
    assert_eq!(o.headers, vec![OwnedHeader::new("attempt", Some(b"3"))]);
}

#[test]
fn errors() {
    fn f(r: &Record, out: &mut Emitter) -> Result<(), Error> {
        out.emit(&Output::default())?;
        match r.value {
            Some(b"retry") => Err(Error::retry("try again")),
            Some(b"fail") => Err(Error::terminal("never")),
            Some(b"parse") => {
                let n: i32 = "x".parse()?;
                Err(Error::retry(n.to_string()))
            }
            Some(b"badpart") => out
                .emit(&Output {
                    partition: Some(-3),
                    ..Output::default()
                })
                .map_err(|e| Error::from(e).into_terminal()),
            _ => Err(Error::pending()),
        }
    }
    let cases: [(&str, Status, &str); 5] = [
        ("retry", Status::Retry, "try again"),
        ("fail", Status::Fail, "never"),
        ("parse", Status::Retry, "invalid digit found in string"),
        ("badpart", Status::Fail, "malformed output encoding"),
        (
            "pending",
            Status::Fail,
            "no asynchronous operation is outstanding",
        ),
    ];
    for (v, st, msg) in cases {
        let res = run(f, &TestRecord::new("in").value(v));
        assert_eq!(res.status, st, "{}", v);
        assert!(res.outputs.is_empty());
        assert!(
            res.error.as_deref().unwrap().contains(msg),
            "{}: {:?}",
            v,
            res.error
        );
    }
}

fn lookup(r: &Record, _out: &mut Emitter) -> Result<(), Error> {
    let url = format!(
        "http://svc/users/{}",
        String::from_utf8_lossy(r.key.unwrap_or_default())
    );
    let idem = r.idempotency_key();
    let hs = [Header::new("Idempotency-Key", Some(idem.as_bytes()))];
    await_op(
        http(&HttpRequest {
            url: &url,
            headers: &hs,
            timeout: Some(Duration::from_millis(250)),
            ..HttpRequest::default()
        }),
        |_r, _out, res| {
            let resp = match res {
                Ok(resp) => resp,
                Err(e) if e.refused => return Err(Error::from(e).into_terminal()),
                Err(e) => return Err(e.into()),
            };
            let status = resp.status.to_string();
            let body = resp.body().map(|b| b.to_vec());
            let ct = resp.header("Content-Type").map(|v| v.to_vec());
            await_op(timer(Duration::from_millis(1)), move |r, out, _| {
                let hs = [
                    Header::new("status", Some(status.as_bytes())),
                    Header::new("ct", ct.as_deref()),
                ];
                out.emit(&Output {
                    key: r.key,
                    value: body.as_deref(),
                    headers: (&hs).into(),
                    ..Output::default()
                })?;
                Ok(())
            })
        },
    )
}

#[test]
fn async_chain() {
    let mut seen = Vec::new();
    let res = run_with(lookup, &TestRecord::new("t").key("7").at(1, 5), |op| {
        seen.push(op.clone());
        match op {
            Operation::Http { .. } => OpResult::http(
                200,
                &[("Content-Type", b"application/json")],
                Some(b"{\"id\":7}"),
            ),
            Operation::Timer(_) => OpResult::done(),
        }
    });
    assert_eq!(res.status, Status::Ok, "{:?}", res.error);
    let o = &res.outputs[0];
    assert_eq!(
        (o.key.as_deref(), o.value.as_deref()),
        (Some(&b"7"[..]), Some(&b"{\"id\":7}"[..]))
    );
    assert_eq!(
        o.headers,
        vec![
            OwnedHeader::new("status", Some(b"200")),
            OwnedHeader::new("ct", Some(b"application/json"))
        ]
    );
    assert_eq!(
        seen,
        vec![
            Operation::Http {
                method: String::new(),
                url: "http://svc/users/7".into(),
                headers: vec![OwnedHeader::new("Idempotency-Key", Some(b"t/1/5"))],
                body: None,
                timeout: Some(Duration::from_millis(250)),
            },
            Operation::Timer(Duration::from_millis(1)),
        ]
    );
    for (r, st) in [
        (OpResult::error("timed out"), Status::Retry),
        (OpResult::refused("not allowed"), Status::Fail),
    ] {
        let res = run_with(lookup, &TestRecord::new("t").key("7"), |_| r.clone());
        assert_eq!(
            (res.status, res.error.as_deref()),
            (
                st,
                Some(if st == Status::Retry {
                    "timed out"
                } else {
                    "not allowed"
                })
            )
        );
    }
}

// Several operations at once: the first continuation to decide wins.
#[test]
fn async_fan_out() {
    fn f(_r: &Record, _out: &mut Emitter) -> Result<(), Error> {
        for i in 0..3u64 {
            let e = await_op(timer(Duration::from_millis(i)), move |_, out, _| {
                if i < 1 {
                    return Err(Error::pending());
                }
                let v = i.to_string();
                out.emit(&Output {
                    value: Some(v.as_bytes()),
                    ..Output::default()
                })?;
                Ok(())
            });
            assert!(e.as_ref().unwrap_err().is_pending());
        }
        Err(Error::pending())
    }
    let mut n = 0;
    let res = run_with(f, &TestRecord::new("t"), |_| {
        n += 1;
        OpResult::done()
    });
    assert_eq!(res.status, Status::Ok, "{:?}", res.error);
    assert_eq!(res.outputs.len(), 1);
    assert_eq!(res.outputs[0].value.as_deref(), Some(&b"1"[..]));
    assert_eq!(n, 2, "the third operation was canceled");
}

#[test]
fn await_outside_a_record() {
    let e = await_op(timer(Duration::from_millis(1)), |_, _, _| Ok(())).unwrap_err();
    assert!(e.is_terminal());
}

// A completion for a record already decided (canceled, or unknown) is
// tolerated and leaves nothing behind.
#[test]
fn late_and_canceled_completions() {
    fn f(_r: &Record, _out: &mut Emitter) -> Result<(), Error> {
        await_op(timer(Duration::from_millis(1)), |_, _, _| Ok(()))?;
        unreachable!()
    }
    let res = run_with(f, &TestRecord::new("t"), |_| OpResult::done());
    assert_eq!(res.status, Status::Ok);
    let mut canceled = vec![codec::COMPLETION_CANCELED];
    codec::put_str(&mut canceled, b"canceled");
    for (op, r) in [
        (999u32, canceled.clone()),
        (1000, OpResult::done().0),
        (1001, vec![9]),
    ] {
        let n = r.len() as u32;
        crate::hostrun::sim::set_result(op, r);
        assert_eq!(crate::rt::on_complete(12345, op, n), 3);
    }
}

// run performs HTTP requests for real against a local server.
#[test]
fn run_performs_http() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let srv = std::thread::spawn(move || {
        for (i, body) in ["{\"id\":\"7\"}\n", ""].iter().enumerate() {
            let (mut c, _) = l.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut buf).unwrap();
                req.extend_from_slice(&buf[..n]);
            }
            let req = String::from_utf8(req).unwrap();
            assert!(req.starts_with("GET /users/7 HTTP/1.1\r\n"), "{}", req);
            assert!(req.contains("Idempotency-Key: t/1/5\r\n"), "{}", req);
            if i == 0 {
                write!(c, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: {}\r\n\r\n{}", body.len(), body).unwrap();
            } else {
                write!(c, "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n").unwrap();
            }
        }
    });
    fn f(r: &Record, _out: &mut Emitter) -> Result<(), Error> {
        let url = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
        let idem = r.idempotency_key();
        let hs = [Header::new("Idempotency-Key", Some(idem.as_bytes()))];
        await_op(
            http(&HttpRequest {
                url: &url,
                headers: &hs,
                ..HttpRequest::default()
            }),
            |_, out, res| {
                let resp = res?;
                let st = resp.status.to_string();
                let hs = [
                    Header::new("status", Some(st.as_bytes())),
                    Header::new("ct", resp.header("Content-Type")),
                ];
                out.emit(&Output {
                    value: resp.body(),
                    headers: (&hs).into(),
                    ..Output::default()
                })?;
                Ok(())
            },
        )
    }
    let rec = TestRecord::new("t")
        .at(1, 5)
        .value(format!("http://{}/users/7", addr));
    let res = run(f, &rec);
    assert_eq!(res.status, Status::Ok, "{:?}", res.error);
    assert_eq!(
        res.outputs[0].value.as_deref(),
        Some(&b"{\"id\":\"7\"}\n"[..])
    );
    assert_eq!(
        res.outputs[0].headers,
        vec![
            OwnedHeader::new("status", Some(b"200")),
            OwnedHeader::new("ct", Some(b"application/json"))
        ]
    );
    let res = run(f, &rec);
    assert_eq!(
        (res.status, res.outputs[0].value.as_deref()),
        (Status::Ok, Some(&b"abc"[..]))
    );
    assert_eq!(
        res.outputs[0].headers[0],
        OwnedHeader::new("status", Some(b"503"))
    );
    srv.join().unwrap();
    let res = run(f, &TestRecord::new("t").value("https://example.com/"));
    assert_eq!(res.status, Status::Retry);
    assert!(res.error.unwrap().contains("only http://"));
}

// State: get/put/delete/scan over the simulated host, with the record's
// writes kept only when it succeeds, and a scan over several batches.
#[test]
fn state_operations() {
    reset_state();
    fn f(r: &Record, out: &mut Emitter) -> Result<(), Error> {
        let key = r.key.unwrap_or_default();
        match r.header("op").flatten() {
            Some(b"put") => state_put(key, r.value.unwrap_or_default())
                .map_err(|e| Error::terminal(e.to_string()))?,
            Some(b"del") => state_delete(key).map_err(|e| Error::terminal(e.to_string()))?,
            Some(b"get") => {
                let v = state_get(key).map_err(|e| Error::terminal(e.to_string()))?;
                out.emit(&Output {
                    key: Some(key),
                    value: v.as_deref(),
                    ..Output::default()
                })?;
            }
            Some(b"scan") => {
                let mut emitted = Ok(());
                state_scan(key, |k, v| {
                    emitted = out.emit(&Output {
                        key: Some(k),
                        value: Some(v),
                        ..Output::default()
                    });
                    emitted.is_ok()
                })
                .map_err(|e| Error::terminal(e.to_string()))?;
                emitted?;
            }
            _ => {
                state_put(key, b"x").map_err(|e| Error::terminal(e.to_string()))?;
                return Err(Error::terminal("put, then fail"));
            }
        }
        Ok(())
    }
    let op = |k: &[u8], op: &str, v: &[u8]| {
        run(
            f,
            &TestRecord::new("in")
                .key(k)
                .value(v)
                .header("op", Some(op.as_bytes())),
        )
    };
    assert_eq!(op(b"a", "get", b"").outputs[0].value, None);
    assert_eq!(op(b"a", "put", b"1").status, Status::Ok);
    assert_eq!(
        op(b"a", "get", b"").outputs[0].value.as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(op(b"e", "put", b"").status, Status::Ok);
    assert_eq!(
        op(b"e", "get", b"").outputs[0].value.as_deref(),
        Some(&b""[..]),
        "an empty value is a value"
    );
    assert_eq!(op(b"a", "del", b"").status, Status::Ok);
    assert_eq!(op(b"a", "get", b"").outputs[0].value, None);
    let big = vec![b'v'; 5000];
    assert_eq!(op(b"big", "put", &big).status, Status::Ok);
    assert_eq!(
        op(b"big", "get", b"").outputs[0].value.as_deref(),
        Some(&big[..])
    );
    let res = op(b"big", "put", &vec![0u8; (64 << 10) + 1]);
    assert_eq!(res.status, Status::Fail);
    assert!(res.error.unwrap().contains("too large"));
    let res = op(&vec![b'k'; MAX_STATE_KEY_BYTES + 1], "put", b"");
    assert!(res.status == Status::Fail && res.error.unwrap().contains("too large"));
    for i in 0..300 {
        assert_eq!(
            op(format!("s/{:03}", i).as_bytes(), "put", &[b'x'; 300]).status,
            Status::Ok
        );
    }
    let res = op(b"s/", "scan", b"");
    assert_eq!(res.outputs.len(), 300);
    for (i, o) in res.outputs.iter().enumerate() {
        assert_eq!(o.key.as_deref(), Some(format!("s/{:03}", i).as_bytes()));
    }
    // A failed record's write is discarded.
    let res = op(b"e", "other", b"");
    assert_eq!(res.status, Status::Fail);
    assert_eq!(
        op(b"e", "get", b"").outputs[0].value.as_deref(),
        Some(&b""[..])
    );
    assert_eq!(state_snapshot().len(), 302);
    // Outside a record's call.
    assert_eq!(state_get(b"a"), Err(Errno::BAD_HANDLE));
}

// The empty key is a key (ABI.md §4.1): a null and an empty record key
// count under it; a scan of every key lists it first, even when its entry
// alone fills the first scan buffer (the host answers "too small" rather
// than a batch of the empty key alone, whose cursor would start the scan
// over), and an asynchronous scan's batch holds the entry after it too,
// whatever its bound.
#[test]
fn state_empty_key() {
    reset_state();
    fn f(r: &Record, out: &mut Emitter) -> Result<(), Error> {
        let key = r.key.unwrap_or_default();
        match r.header("op").flatten() {
            Some(b"scan") => {
                let mut emitted = Ok(());
                state_scan(b"", |k, v| {
                    emitted = out.emit(&Output {
                        key: Some(k),
                        value: Some(&v[..v.len().min(8)]),
                        ..Output::default()
                    });
                    emitted.is_ok()
                })
                .map_err(|e| Error::terminal(e.to_string()))?;
                Ok(emitted?)
            }
            Some(b"fill") => state_put(key, &vec![b'v'; (64 << 10) - 8 - 4])
                .map_err(|e| Error::terminal(e.to_string())),
            _ => {
                let mut v = state_get(key)
                    .map_err(|e| Error::terminal(e.to_string()))?
                    .unwrap_or_default();
                v.push(b'x');
                state_put(key, &v).map_err(|e| Error::terminal(e.to_string()))
            }
        }
    }
    assert_eq!(run(f, &TestRecord::new("in")).status, Status::Ok);
    assert_eq!(run(f, &TestRecord::new("in").key("")).status, Status::Ok);
    assert_eq!(run(f, &TestRecord::new("in").key("a")).status, Status::Ok);
    let snap = state_snapshot();
    assert!(
        snap.contains(&(b"".to_vec(), b"xx".to_vec()))
            && snap.contains(&(b"a".to_vec(), b"x".to_vec())),
        "{:?}",
        snap
    );
    let keys = |res: &RunResult| {
        res.outputs
            .iter()
            .map(|o| o.key.clone().unwrap_or_default())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        keys(&run(f, &TestRecord::new("in").header("op", Some(b"scan")))),
        vec![b"".to_vec(), b"a".to_vec()]
    );
    assert_eq!(
        run(f, &TestRecord::new("in").header("op", Some(b"fill"))).status,
        Status::Ok
    );
    let res = run(f, &TestRecord::new("in").header("op", Some(b"scan")));
    assert_eq!(
        (res.status, keys(&res)),
        (Status::Ok, vec![b"".to_vec(), b"a".to_vec()]),
        "{:?}",
        res.error
    );
    let res = run(
        async_state,
        &TestRecord::new("in")
            .key("")
            .header("op", Some(b"scan"))
            .header("size", Some(b"1")),
    );
    assert_eq!(res.status, Status::Ok, "{:?}", res.error);
    assert_eq!(
        keys(&res),
        vec![b"".to_vec(), b"a".to_vec(), b"batches".to_vec()]
    );
    assert_eq!(
        res.outputs[2].value.as_deref(),
        Some(&b"1"[..]),
        "one batch: the empty key and a"
    );
}

// The asynchronous state reads (ABI.md §7.3) over the simulated host: a get
// sees the record's writes made before it started (not after), a scan
// chains batches of a bounded size, and a request refused at async_start
// fails the record terminally with the errno, as in the Go SDK.
fn async_state(r: &Record, _out: &mut Emitter) -> Result<(), Error> {
    let key = r.key.unwrap_or_default().to_vec();
    if let Some(v) = r.header("set").flatten() {
        state_put(&key, v).map_err(|e| Error::terminal(e.to_string()))?;
    }
    match r.header("op").flatten() {
        Some(b"scan") => {
            let size: usize = r
                .header("size")
                .flatten()
                .and_then(|s| std::str::from_utf8(s).ok()?.parse().ok())
                .unwrap_or(0);
            scan_all(key, Vec::new(), size, 0)
        }
        _ => {
            let res = await_op(state_get_async(&key), move |_r, out, res| {
                let v = res.map_err(|e| Error::from(e).into_terminal())?;
                let found: &[u8] = if v.is_some() { b"yes" } else { b"no" };
                let hs = [Header::new("found", Some(found))];
                out.emit(&Output {
                    key: Some(&key),
                    value: v.as_deref(),
                    headers: (&hs).into(),
                    ..Output::default()
                })?;
                Ok(())
            });
            if r.header("after").is_some() {
                // A write after the read started: the read does not see it.
                state_put(r.key.unwrap_or_default(), b"later")
                    .map_err(|e| Error::terminal(e.to_string()))?;
            }
            res
        }
    }
}

// Emits every key with prefix after after, one batch per operation, then
// a last output with the number of batches.
fn scan_all(prefix: Vec<u8>, after: Vec<u8>, size: usize, batches: usize) -> Result<(), Error> {
    await_op(
        state_scan_async(&prefix, &after, size),
        move |_r, out, res| {
            let b = res.map_err(|e| Error::from(e).into_terminal())?;
            if b.done() {
                let n = batches.to_string();
                out.emit(&Output {
                    key: Some(b"batches"),
                    value: Some(n.as_bytes()),
                    ..Output::default()
                })?;
                return Ok(());
            }
            for e in &b.entries {
                out.emit(&Output {
                    key: Some(&e.key),
                    value: Some(&e.value),
                    ..Output::default()
                })?;
            }
            scan_all(prefix, b.after().to_vec(), size, batches + 1)
        },
    )
}

#[test]
fn async_state_reads() {
    reset_state();
    let get = |k: &str, hs: &[(&str, &[u8])]| {
        let mut r = TestRecord::new("in").key(k);
        for (h, v) in hs {
            r = r.header(h, Some(v));
        }
        let mut ops = 0;
        let res = run_with(async_state, &r, |_| {
            ops += 1;
            OpResult::error("not a state operation")
        });
        assert_eq!(ops, 0, "the simulated host answers state operations itself");
        res
    };
    let kv = |res: &RunResult| -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        res.outputs
            .iter()
            .map(|o| (o.key.clone().unwrap(), o.value.clone()))
            .collect()
    };
    // Missing; the record's own write before the read; committed; an empty value.
    let res = get("a", &[]);
    assert_eq!(res.status, Status::Ok, "{:?}", res.error);
    assert_eq!(
        (kv(&res), res.outputs[0].headers.clone()),
        (
            vec![(b"a".to_vec(), None)],
            vec![OwnedHeader::new("found", Some(b"no"))]
        )
    );
    assert_eq!(
        kv(&get("a", &[("set", b"7")])),
        vec![(b"a".to_vec(), Some(b"7".to_vec()))]
    );
    assert_eq!(
        kv(&get("a", &[])),
        vec![(b"a".to_vec(), Some(b"7".to_vec()))]
    );
    assert_eq!(
        kv(&get("e", &[("set", b"")])),
        vec![(b"e".to_vec(), Some(Vec::new()))],
        "an empty value is a value"
    );
    // A write after async_start is not seen by the read, but is the record's.
    assert_eq!(
        kv(&get("a", &[("after", b"")])),
        vec![(b"a".to_vec(), Some(b"7".to_vec()))]
    );
    assert_eq!(
        kv(&get("a", &[])),
        vec![(b"a".to_vec(), Some(b"later".to_vec()))]
    );
    // A scan chained over batches of at most 100 bytes, with the record's
    // own write (s/, over the committed s/000..s/029), in key order.
    for i in 0..30 {
        let k = format!("s/{:03}", i);
        assert_eq!(get(&k, &[("set", &vec![b'v'; i])]).status, Status::Ok);
    }
    state_put(b"x", b"").unwrap_err(); // outside a record
    let res = get("s/", &[("op", b"scan"), ("size", b"100"), ("set", b"own")]);
    assert_eq!(res.status, Status::Ok, "{:?}", res.error);
    let got = kv(&res);
    assert_eq!(got.len(), 32);
    assert_eq!(got[0], (b"s/".to_vec(), Some(b"own".to_vec())));
    for i in 0..30 {
        assert_eq!(
            got[i + 1],
            (format!("s/{:03}", i).into_bytes(), Some(vec![b'v'; i]))
        );
    }
    let batches: usize = std::str::from_utf8(got[31].1.as_deref().unwrap())
        .unwrap()
        .parse()
        .unwrap();
    assert!(batches >= 8, "{} batches of at most 100 bytes", batches);
    // Batches hold whole entries within the bound, at least one.
    let res = get("s/", &[("op", b"scan"), ("size", b"1")]);
    assert_eq!(res.outputs.len(), 32);
    assert_eq!(res.outputs[31].value.as_deref(), Some(&b"31"[..]));
    let res = get("s/", &[("op", b"scan")]);
    assert_eq!(
        res.outputs.last().unwrap().value.as_deref(),
        Some(&b"1"[..]),
        "the default bound holds them all"
    );
    // Refused at async_start: terminal, naming the operation and the errno.
    let long = "k".repeat(MAX_STATE_KEY_BYTES + 1);
    set_foreign_state_prefix(b"other-");
    let cases: Vec<(RunResult, &str)> = vec![
        (
            get(&long, &[]),
            "wasmstream: start state_get operation: state key or value too large",
        ),
        (
            get(&long, &[("op", b"scan")]),
            "wasmstream: start state_scan operation: state key or value too large",
        ),
        (
            get("other-a", &[]),
            "wasmstream: start state_get operation: state key outside the record's partition",
        ),
    ];
    // A scan's prefix is not checked against the partition.
    assert_eq!(get("other-", &[("op", b"scan")]).status, Status::Ok);
    set_state_enabled(false);
    let cases = cases.into_iter().chain([(
        get("a", &[]),
        "wasmstream: start state_get operation: state not enabled for this pipeline",
    )]);
    for (res, want) in cases {
        assert_eq!(res.status, Status::Fail, "{}", want);
        assert_eq!(res.error.as_deref(), Some(want));
        assert!(res.outputs.is_empty());
    }
    reset_state();
    assert_eq!(
        get("other-a", &[]).status,
        Status::Ok,
        "reset_state undoes the refusals"
    );
}

#[test]
fn async_state_refusal_fails_before_writes_stick() {
    reset_state();
    // A write then a refused read: the record fails and its write goes.
    let res = run(
        async_state,
        &TestRecord::new("in")
            .key("k".repeat(MAX_STATE_KEY_BYTES + 1))
            .header("set", Some(b"1")),
    );
    assert_eq!(res.status, Status::Fail);
    assert!(res.error.unwrap().contains("too large"));
    set_foreign_state_prefix(b"o");
    let res = run(
        async_state,
        &TestRecord::new("in")
            .key("p")
            .header("set", Some(b"1"))
            .header("op", Some(b"scan")),
    );
    assert_eq!(res.status, Status::Ok);
    let res = run(
        async_state,
        &TestRecord::new("in").key("o").header("set", Some(b"1")),
    );
    assert_eq!(
        (res.status, res.error.as_deref()),
        (
            Status::Fail,
            Some("state key outside the record's partition")
        )
    );
    assert_eq!(state_snapshot(), vec![(b"p".to_vec(), b"1".to_vec())]);
}

/// Emits as many outputs as the value says ("<n>"), then fails for "fail"
/// (after two outputs), waits on a timer for "wait", emits with a bad
/// partition for "badpart" (ignoring the error, then one more).
fn fan_out(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    let v = std::str::from_utf8(r.value.unwrap_or_default()).unwrap_or_default();
    match v {
        "fail" => {
            out.emit(&Output {
                value: Some(b"a"),
                ..Output::default()
            })?;
            out.emit(&Output {
                value: Some(b"b"),
                ..Output::default()
            })?;
            Err(Error::terminal("failed after two outputs"))
        }
        "wait" => {
            out.emit(&Output {
                value: Some(b"before the wait"),
                ..Output::default()
            })?;
            await_op(timer(Duration::from_millis(1)), |_r, out, _res| {
                out.emit(&Output {
                    value: Some(b"after"),
                    ..Output::default()
                })?;
                Ok(())
            })
        }
        "badpart" => {
            let e = out.emit(&Output {
                partition: Some(-2),
                ..Output::default()
            });
            assert_eq!(e, Err(Errno::BAD_ENCODING));
            out.emit(&Output {
                value: Some(b"kept"),
                ..Output::default()
            })?;
            Ok(())
        }
        _ => {
            let n: usize = v.parse()?;
            let big = vec![b'x'; 3000];
            for i in 0..n {
                let k = i.to_string();
                let value = if r.key == Some(&b"big"[..]) {
                    &big[..]
                } else {
                    k.as_bytes()
                };
                out.emit(&Output {
                    key: Some(k.as_bytes()),
                    value: Some(value),
                    headers: r.headers.into(),
                    ..Output::default()
                })?;
            }
            Ok(())
        }
    }
}

// In a batch call (ABI.md §10) each record ends as it would alone: the same
// status, the same outputs in the same order — in the list, past 64 outputs
// or 64 KiB one by one — a failed record's outputs discarded, a pending
// record pending while the next ones run, with buffers of their own.
#[test]
fn batch_same_as_alone() {
    let recs: Vec<TestRecord> = [
        ("", "3"),
        ("", "0"),
        ("", "fail"),
        ("", "64"),
        ("", "65"),
        ("big", "30"),
        ("", "wait"),
        ("", "1"),
        ("", "badpart"),
        ("", "200"),
        ("", "x"),
    ]
    .iter()
    .enumerate()
    .map(|(i, (k, v))| {
        TestRecord::new("in")
            .key(k)
            .value(v)
            .header("h", Some(b"v"))
            .at(1, i as i64)
    })
    .collect();
    let got = crate::hostrun::run_batch(fan_out, &recs);
    assert_eq!(got.len(), recs.len());
    for (i, r) in recs.iter().enumerate() {
        let want = if r.value.as_deref() == Some(&b"wait"[..]) {
            RunResult {
                status: Status::Pending,
                outputs: Vec::new(),
                error: Some(String::new()),
            }
        } else {
            run(fan_out, r)
        };
        assert_eq!(
            got[i].status, want.status,
            "record {}: {:?}",
            i, got[i].error
        );
        assert_eq!(got[i].outputs, want.outputs, "record {}", i);
        assert_eq!(got[i].error, want.error, "record {}", i);
    }
    assert_eq!(got[9].outputs.len(), 200);
    assert_eq!(
        (got[2].status, got[10].status),
        (Status::Fail, Status::Retry)
    );
    // The list holds up to 64 outputs or 64 KiB (21 outputs of 3000 bytes
    // fit, 22 do not); past them, the list and the rest go by emit.
    for (k, v, emits) in [
        ("", "63", 0),
        ("", "64", 64),
        ("", "100", 100),
        ("big", "21", 0),
        ("big", "22", 22),
        ("big", "30", 30),
    ] {
        let before = crate::hostrun::sim::emit_calls();
        let got = crate::hostrun::run_batch(fan_out, &[TestRecord::new("in").key(k).value(v)]);
        let n = crate::hostrun::sim::emit_calls() - before;
        assert_eq!(
            n,
            emits,
            "{} outputs of {}: emit calls",
            v,
            if k.is_empty() {
                "a few bytes"
            } else {
                "3000 bytes"
            }
        );
        assert_eq!(
            (got[0].status, got[0].outputs.len()),
            (Status::Ok, v.parse::<usize>().unwrap())
        );
    }
    // The same processor, one batch after another on the instance.
    let again = crate::hostrun::run_batch(upper, &recs[..3]);
    assert_eq!(
        again
            .iter()
            .map(|r| r.outputs[0].value.clone())
            .collect::<Vec<_>>(),
        vec![
            Some(b"3".to_vec()),
            Some(b"0".to_vec()),
            Some(b"FAIL".to_vec())
        ]
    );
}
