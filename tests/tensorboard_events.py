"""Checks a run directory's TensorBoard event files against its metrics.jsonl
(tests/test_tensorboard.sh): every record's two CRC-32Cs, checked here with
a bit-wise CRC of our own; every Event decoded by protoc's Python classes of
tests/proto; and the scalars, after TensorBoard's purge at SessionLog START,
equal to metrics.jsonl's values at their steps and wall times.

usage: tensorboard_events.py RUN_DIR PROTO_PY_DIR MIN_FILES"""
import glob
import json
import os
import struct
import sys

sys.path.insert(0, sys.argv[2])
import event_pb2  # noqa: E402  (made by protoc from tests/proto/event.proto)


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        blob = f.read()
    at = 0
    while at < len(blob):
        head = blob[at:at + 12]
        assert len(head) == 12, f"{path}: a record's header is cut at byte {at}"
        (n,) = struct.unpack("<Q", head[:8])
        assert struct.unpack("<I", head[8:])[0] == masked(head[:8]), f"{path}: length CRC at byte {at}"
        data, tail = blob[at + 12:at + 12 + n], blob[at + 12 + n:at + 16 + n]
        assert len(data) == n and len(tail) == 4, f"{path}: a record is cut at byte {at}"
        assert struct.unpack("<I", tail)[0] == masked(data), f"{path}: data CRC at byte {at}"
        at += 16 + n
        yield data


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected(run_dir):
    """metrics.jsonl's values as (tag, step) -> (value, wall time)."""
    want = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            kind, step, time = rec["kind"], rec["step"], rec["time"]
            if kind == "monitor":
                tag = f"monitor/{rec['monitor']}/{rec['metric']}"
                tag += f"/layer{rec['layer']}" if rec["layer"] >= 0 else ""
                if rec["value"] is not None:
                    want[tag, step] = (f32(rec["value"]), time)
                continue
            for key, value in rec.items():
                if key not in ("kind", "time", "step", "epoch") and isinstance(value, (int, float)):
                    want[f"{kind}/{key}", step] = (f32(value), time)
    return want


def charted(run_dir, min_files):
    """The scalars TensorBoard keeps, reading the files in name order."""
    files = sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")))
    assert len(files) >= min_files, f"{len(files)} event files, expected {min_files} or more"
    got, starts = {}, []
    for path in files:
        for i, data in enumerate(records(path)):
            ev = event_pb2.Event()
            ev.ParseFromString(data)
            assert ev.SerializeToString() == data, f"{path}: record {i} has bytes the Event does not account for"
            if i == 0:
                assert ev.file_version == "brain.Event:2", f"{path}: first event {ev}"
                continue
            if ev.WhichOneof("what") == "session_log":
                assert ev.session_log.status == event_pb2.SessionLog.START
                starts.append(ev.step)
                got = {k: v for k, v in got.items() if k[1] < ev.step}
                continue
            assert ev.WhichOneof("what") == "summary" and len(ev.summary.value) == 1, f"{path}: {ev}"
            value = ev.summary.value[0]
            assert value.WhichOneof("value") == "simple_value"
            assert (value.tag, ev.step) not in got, f"{path}: {value.tag} twice at step {ev.step}"
            got[value.tag, ev.step] = (value.simple_value, ev.wall_time)
    return got, starts


def main():
    run_dir, min_files = sys.argv[1], int(sys.argv[3])
    got, starts = charted(run_dir, min_files)
    want = expected(run_dir)
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    assert not missing and not extra, f"missing {missing[:5]}, unexpected {extra[:5]}"
    wrong = [(k, got[k], want[k]) for k in want if got[k] != want[k]]
    assert not wrong, f"{len(wrong)} scalars differ, e.g. {wrong[:3]}"
    for tag in ("train/loss", "train/lr", "epoch/val_loss", "monitor/grad_norm/total_grad_norm"):
        assert any(k[0] == tag for k in got), f"no {tag}"
    print(f"{len(got)} scalars in {min_files}+ files match metrics.jsonl; SessionLog START at {starts}")


main()
