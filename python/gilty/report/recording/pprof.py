"""pprof (``.pb.gz``): a gzipped ``profile.proto`` that pprof, Pyroscope, Parca and other
continuous-profiling engines read.

Each distinct (process, thread, state, stack) is one sample with two values: the samples taken and
the wall time they stand for (samples x the sampling period). Labels carry what gilty knows and a
flame graph does not: ``state`` (holding_gil, waiting_gil, gc, native, idle, ...), ``pid``,
``process`` and ``thread`` (strings), ``tid`` (a number), so any pprof tool can filter or pivot on
them (``pprof -tagfocus state=waiting_gil``). Locations are Python frames: function (qualified
name), file and line; a sample without a Python stack has the one frame ``(no Python stack)``.

The encoder is the few protobuf wire rules the message needs (varints and length-delimited fields),
so the format costs no dependency.
"""

from __future__ import annotations

import gzip

from gilty.report.labels import command_text, state_name
from gilty.sampling.native_frames import is_native, native_offset, native_parts
from gilty.sampling.session import NO_STACK, Recording

NO_STACK_FUNCTION = "(no Python stack)"

# profile.proto field numbers (github.com/google/pprof, proto/profile.proto).
_P_SAMPLE_TYPE, _P_SAMPLE, _P_MAPPING, _P_LOCATION, _P_FUNCTION, _P_STRING_TABLE = 1, 2, 3, 4, 5, 6
_P_TIME_NANOS, _P_DURATION_NANOS, _P_PERIOD_TYPE, _P_PERIOD, _P_COMMENT, _P_DEFAULT_SAMPLE_TYPE = 9, 10, 11, 12, 13, 14


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s are ten-byte two's complement varints
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _int_field(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value) if value else b""


def _bytes_field(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _packed(field: int, values) -> bytes:
    return _bytes_field(field, b"".join(_varint(v) for v in values)) if values else b""


class _Strings:
    """The string table: index 0 is the empty string, as the format requires."""

    def __init__(self) -> None:
        self.index = {"": 0}

    def __call__(self, text: str) -> int:
        found = self.index.get(text)
        if found is None:
            found = self.index[text] = len(self.index)
        return found

    def encoded(self) -> bytes:
        # Protobuf strings must be valid UTF-8: a file name with undecodable bytes keeps a marker.
        return b"".join(_bytes_field(_P_STRING_TABLE, s.encode("utf-8", "replace")) for s in self.index)


def _value_type(strings: _Strings, kind: str, unit: str) -> bytes:
    return _int_field(1, strings(kind)) + _int_field(2, strings(unit))


def _label(strings: _Strings, key: str, text: str = "", num: int = 0) -> bytes:
    return _bytes_field(3, _int_field(1, strings(key)) + _int_field(2, strings(text) if text else 0) + _int_field(3, num))


def render_bytes(recording: Recording) -> bytes:
    strings = _Strings()
    functions: dict = {}  # (name, file) -> function id
    locations: dict = {}  # (function id, line) -> location id
    function_msgs: list = []
    location_msgs: list = []

    def location(name: str, file: str, line: int) -> int:
        fid = functions.get((name, file))
        if fid is None:
            fid = functions[(name, file)] = len(functions) + 1
            # A C frame's file: its source file where its library has line tables, else the library.
            library, source, _ = native_parts(file) if is_native(line) else (file, None, None)
            # No system_name: pprof would "demangle" it into the name and drop `<module>` as template arguments.
            function_msgs.append(
                _bytes_field(
                    _P_FUNCTION, _int_field(1, fid) + _int_field(2, strings(name)) + _int_field(4, strings(source or library))
                )
            )
        lid = locations.get((fid, line))
        if lid is None:
            lid = locations[(fid, line)] = len(locations) + 1
            # A C frame of `record --native`: its source line or none; its offset in the library as the address.
            address = _int_field(3, native_offset(line)) if is_native(line) else b""
            number = (native_parts(file)[2] or 0) if is_native(line) else max(line, 0)
            line_msg = _int_field(1, fid) + _int_field(2, number)
            location_msgs.append(
                _bytes_field(_P_LOCATION, _int_field(1, lid) + _int_field(2, 1) + address + _bytes_field(4, line_msg))
            )
        return lid

    period_ns = max(1, round(1e9 / recording.rate_hz)) if recording.rate_hz > 0 else 1
    samples: list = []
    for session in recording.sessions:
        pid = session.target.pid
        process = f"pid {pid} · {command_text(session)}"
        stack_locations: dict = {}
        for (tid, state, stack_id), n in session.stack_counts().items():
            if n <= 0:
                continue
            ids = stack_locations.get(stack_id)
            if ids is None:
                frames = session.stack(stack_id) if stack_id != NO_STACK else []
                ids = [location(str(f), str(file), int(line)) for f, file, line in frames] or [location(NO_STACK_FUNCTION, "", 0)]
                stack_locations[stack_id] = ids
            labels = (
                _label(strings, "state", state_name(state))
                + _label(strings, "pid", str(pid))
                + _label(strings, "process", process)
                + _label(strings, "thread", session.thread_name(tid))
                + _label(strings, "tid", num=tid)
            )
            samples.append(_bytes_field(_P_SAMPLE, _packed(1, ids) + _packed(2, [n, n * period_ns]) + labels))

    duration_s = max((s.duration_s or 0.0 for s in recording.sessions), default=0.0)
    head = _bytes_field(_P_SAMPLE_TYPE, _value_type(strings, "samples", "count")) + _bytes_field(
        _P_SAMPLE_TYPE, _value_type(strings, "wall", "nanoseconds")
    )
    comments = ["gilty: sampled from outside; labels: state, pid, process, thread, tid"]
    if recording.partial:
        comments.append(f"PARTIAL: {recording.partial_reason or 'the recording did not end as planned'}")
    # One mapping for every Python frame, marked as already symbolized, so tools do not look for a binary.
    mapping = _bytes_field(
        _P_MAPPING, _int_field(1, 1) + _int_field(5, strings("python")) + _int_field(7, 1) + _int_field(8, 1) + _int_field(9, 1)
    )
    tail = (
        _int_field(_P_TIME_NANOS, int(recording.start_time * 1e9))
        + _int_field(_P_DURATION_NANOS, int(duration_s * 1e9))
        + _bytes_field(_P_PERIOD_TYPE, _value_type(strings, "wall", "nanoseconds"))
        + _int_field(_P_PERIOD, period_ns)
        + b"".join(_int_field(_P_COMMENT, strings(c)) for c in comments)
        + _int_field(_P_DEFAULT_SAMPLE_TYPE, strings("wall"))
    )
    # The string table is written last: every other part has added its strings by then.
    body = head + b"".join(samples) + mapping + b"".join(location_msgs) + b"".join(function_msgs) + tail + strings.encoded()
    return gzip.compress(body, compresslevel=6, mtime=0)


def render(recording: Recording) -> bytes:
    return render_bytes(recording)
