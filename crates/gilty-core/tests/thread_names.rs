//! Reads `threading` thread names out of live targets on every installed CPython and compares them
//! with what the target itself reports.
//!
//! Run: cargo test -p gilty-core --test thread_names -- --nocapture

use gilty_core::interp::interpreter::attach;
use gilty_core::interp::thread_names::python_thread_names;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

const PYTHONS: &[&str] = &[
    "/root/.pyenv/versions/3.10.13/bin/python3",
    "/root/.pyenv/versions/3.11.7/bin/python3",
    "/root/.pyenv/versions/3.12.1/bin/python3",
    "/root/.pyenv/versions/3.13.0/bin/python3",
    "/usr/bin/python3.11",
];

/// Kills and reaps the target when dropped, including on panic.
struct Target(Child);

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the target and returns it with the JSON line it printed before "ready".
fn start(python: &str, args: &[&str]) -> (Target, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/targets/named_threads.py");
    let child = Command::new(python)
        .arg(&script)
        .args(args)
        .env("PYTHONIOENCODING", "utf-8")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{python}: cannot start target: {e}"));
    let mut target = Target(child);
    let mut out = BufReader::new(target.0.stdout.take().unwrap());
    let (mut json, mut line) = (String::new(), String::new());
    loop {
        line.clear();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "{python}: target exited before printing ready");
        match line.trim_end() {
            "ready" => break,
            l => json = l.to_owned(),
        }
    }
    (target, json)
}

/// Parses a flat JSON object of string keys and string values (what json.dumps gives for a str
/// dict).
fn parse_flat_json(s: &str) -> HashMap<String, String> {
    let mut chars = s.trim().chars().peekable();
    let mut out = HashMap::new();
    let string = |chars: &mut std::iter::Peekable<std::str::Chars>| -> String {
        while chars
            .next_if(|c| c.is_whitespace() || *c == ',' || *c == ':')
            .is_some()
        {}
        assert_eq!(chars.next(), Some('"'), "expected a JSON string in {s}");
        let mut v = String::new();
        let mut pending_high: Option<u32> = None;
        loop {
            match chars.next().expect("unterminated JSON string") {
                '"' => return v,
                '\\' => {
                    let c = chars.next().unwrap();
                    let plain = match c {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'b' => '\u{8}',
                        'f' => '\u{c}',
                        'u' => {
                            let hex: String = (0..4).map(|_| chars.next().unwrap()).collect();
                            let u = u32::from_str_radix(&hex, 16).unwrap();
                            if (0xd800..0xdc00).contains(&u) {
                                pending_high = Some(u);
                                continue;
                            }
                            let code = match pending_high.take() {
                                Some(h) => 0x10000 + ((h - 0xd800) << 10) + (u - 0xdc00),
                                None => u,
                            };
                            char::from_u32(code).unwrap()
                        }
                        other => other,
                    };
                    v.push(plain);
                }
                c => v.push(c),
            }
        }
    };
    assert_eq!(chars.next(), Some('{'));
    loop {
        while chars.next_if(|c| c.is_whitespace() || *c == ',').is_some() {}
        if chars.peek() == Some(&'}') {
            return out;
        }
        let k = string(&mut chars);
        let v = string(&mut chars);
        out.insert(k, v);
    }
}

fn expected_map(json: &str) -> HashMap<u64, String> {
    parse_flat_json(json)
        .into_iter()
        .map(|(k, v)| (k.parse::<u64>().expect("ident"), v))
        .collect()
}

fn check(python: &str, args: &[&str]) -> usize {
    let (target, json) = start(python, args);
    let pid = target.0.id() as i32;
    let expected = expected_map(&json);
    let interp = attach(pid).unwrap_or_else(|e| panic!("{python}: attach failed: {e}"));
    for round in 0..3 {
        let t0 = Instant::now();
        let got = python_thread_names(&interp)
            .unwrap_or_else(|e| panic!("{python}: python_thread_names: {e}"));
        let took = t0.elapsed();
        for (ident, name) in &expected {
            assert_eq!(
                got.get(ident),
                Some(name),
                "{python} {args:?}: ident {ident:#x} (round {round})"
            );
        }
        assert_eq!(
            got.len(),
            expected.len(),
            "{python} {args:?}: extra entries: got {got:?}"
        );
        if round == 0 {
            println!(
                "{python} {args:?} (Python {}): {} names match in {took:?}",
                interp.version_string(),
                got.len()
            );
        }
    }
    expected.len()
}

#[test]
fn thread_names_match_threading() {
    let mut ran = 0;
    for python in PYTHONS {
        if !Path::new(python).exists() {
            println!("SKIP {python}: not installed");
            continue;
        }
        let n = check(python, &[]);
        assert!(n >= 50, "{python}: target reported only {n} threads");
        // No threading module (or only what the interpreter imported at startup).
        check(python, &["--bare"]);
        ran += 1;
    }
    println!("{ran} interpreters checked");
}

#[test]
fn flat_json_parser() {
    let m = parse_flat_json(r#"{"1": "a\"b", "2": "\u03b1\ud83e\uddf5", "3": "名"}"#);
    assert_eq!(m["1"], "a\"b");
    assert_eq!(m["2"], "α🧵");
    assert_eq!(m["3"], "名");
}
