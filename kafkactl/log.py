"""``kafkactl log``: dump, verify and recover log files offline.

- ``dump PATH``: batches (and with ``--records`` records) of a segment, an
  index file, or every segment of a partition dir.
- ``verify DIR``: checks every segment and index of a partition dir or of a
  whole log dir; changes nothing; exit 1 when log data is corrupt. A missing
  or stale index is reported but is not corruption (indexes are derived data).
- ``recover DIR``: the broker's own start-up recovery (:meth:`broker.log.Log.open`
  from offset 0), run offline; ``--dry-run`` reports the same cuts without
  touching a file.

Run these against a stopped broker's directories: a running broker owns its
active segments. ``recover`` (not ``--dry-run``) takes the lock of each log dir
it writes in that a broker has used (``<log.dir>/.lock``), so it refuses, exit 1,
a dir that a running broker holds, and a broker cannot start on it meanwhile.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path

import typer

from broker.log import Log, LogConfig, LogDirInUseError, LogDirLocks, lock_log_dirs
from broker.log.dirlock import LOCK_FILE
from broker.log.scan import scan_file
from kafkactl import logfiles
from kafkactl._common import output_format
from kafkactl.encoding import short
from kafkactl.errors import EXIT_PROBLEM, CliError
from kafkactl.output import OutputFormat, emit

app = typer.Typer(help="Inspect, verify and recover log segments offline.", no_args_is_help=True)


def _offsets_decoder():
    try:
        from broker.coordinator.records import decode_offsets_record
    except ImportError as exc:  # pragma: no cover - present once the coordinator is installed
        raise CliError(f"the __consumer_offsets decoder is unavailable: {exc}") from exc
    return decode_offsets_record


def _transaction_log_decoder():
    from broker.txn.records import decode_transaction_log_record

    return decode_transaction_log_record


def _print_entry(item: dict) -> None:
    if "problem" in item:
        print(f"CORRUPT at position {item['position']}: {item['problem']}")
        return
    if item["magic"] == 2:
        print(
            f"baseOffset: {item['base_offset']} lastOffset: {item['last_offset']} count: {item['count']} "
            f"position: {item['position']} size: {item['size']} magic: 2 compresscodec: {item['compression']} "
            f"{item['timestamp_type']}: {item['max_timestamp']} producerId: {item['producer_id']} "
            f"producerEpoch: {item['producer_epoch']} baseSequence: {item['base_sequence']} "
            f"partitionLeaderEpoch: {item['partition_leader_epoch']} isTransactional: {str(item['is_transactional']).lower()} "
            f"isControl: {str(item['is_control']).lower()} crc: {item['crc']} isvalid: {str(item['crc_valid']).lower()}"
        )
    else:
        print(
            f"offset: {item['offset']} position: {item['position']} size: {item['size']} magic: {item['magic']} "
            f"compresscodec: {item['compression']} {item['timestamp_type'] or 'NoTimestamp'}: {item['timestamp']} "
            f"crc: {item['crc']} isvalid: true"
        )
    for rec in item.get("records", ()):
        key = short(_raw(rec, "key"))
        value = short(_raw(rec, "value"))
        headers = ",".join(f"{h['key']}={h['value']}" for h in rec["headers"])
        line = f"| offset: {rec['offset']} timestamp: {rec['timestamp']} key: {key} payload: {value} headers: [{headers}]"
        if "decoded" in rec:
            line += " decoded: " + json.dumps(rec["decoded"], default=str)
        print(line)


def _raw(rec: dict, name: str):
    value = rec[name]
    if value is None:
        return None
    if rec.get(f"{name}_encoding") == "base64":
        import base64

        return base64.b64decode(value)
    return value.encode("utf-8")


@app.command()
def dump(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="A .log/.index/.timeindex file or a partition dir."),
    records: bool = typer.Option(False, "--records", help="Also print every record (offset, timestamp, key, value, headers)."),
    offsets_decoder: bool = typer.Option(
        False, "--offsets-decoder", help="Decode keys/values as __consumer_offsets records (implies --records)."
    ),
    transaction_log_decoder: bool = typer.Option(
        False, "--transaction-log-decoder",
        help="Decode keys/values as __transaction_state records (implies --records).",
    ),
) -> None:
    """Print the batches of log segments. JSON output is one object per line (per batch or index entry)."""
    fmt = output_format(ctx)
    if offsets_decoder and transaction_log_decoder:
        raise CliError("give at most one of --offsets-decoder and --transaction-log-decoder")
    decoder = (_offsets_decoder() if offsets_decoder else
               _transaction_log_decoder() if transaction_log_decoder else None)
    opts = logfiles.DumpOptions(records=records or decoder is not None, decoder=decoder)
    files = logfiles.segment_files(path)
    if not files:
        raise CliError(f"no log segments in {path} (give a partition dir <topic>-<partition> or a segment file)")
    corrupt = False
    for f in files:
        if fmt is OutputFormat.table:
            print(f"Dumping {f}")
        if f.suffix in (".index", ".timeindex"):
            for entry in logfiles.iter_index(f):
                if fmt is OutputFormat.table:
                    print(" ".join(f"{k}: {v}" for k, v in entry.items()))
                else:
                    sys.stdout.write(json.dumps({"file": str(f), **entry}) + "\n")
            continue
        for item in logfiles.iter_segment(f, opts):
            corrupt |= "problem" in item
            if fmt is OutputFormat.table:
                _print_entry(item)
            else:
                sys.stdout.write(json.dumps(item, default=str) + "\n")
    if corrupt:
        raise typer.Exit(EXIT_PROBLEM)


def _check_index(seg_path: Path, seg_size: int, base: int, next_offset: int | None) -> list[str]:
    """Problems with a segment's indexes (none of them corruption of log data)."""
    notes = []
    index = seg_path.with_suffix(".index")
    time_index = seg_path.with_suffix(".timeindex")
    if not index.exists():
        notes.append(f"{index.name}: missing (rebuilt on recovery)")
    else:
        raw = index.read_bytes()
        if len(raw) % 8:
            notes.append(f"{index.name}: size {len(raw)} is not a multiple of 8 (stale; rebuilt on recovery)")
        last_off, last_pos = -1, -1
        fd = os.open(seg_path, os.O_RDONLY)
        try:
            for i, entry in enumerate(logfiles.iter_index(index)):
                off, pos = entry["offset"], entry["position"]
                if off <= last_off and i > 0 or pos <= last_pos and i > 0:
                    notes.append(f"{index.name}: entry {i} ({off}, {pos}) not increasing (stale)")
                    break
                if pos >= seg_size or (next_offset is not None and off >= next_offset):
                    notes.append(f"{index.name}: entry {i} ({off}, {pos}) points past the log data (stale)")
                    break
                head = os.pread(fd, 27, pos)
                if len(head) == 27:
                    bo, _, _, _, _, _, lod = struct.unpack(">qiiBIhi", head)
                    if not bo <= off <= bo + lod:
                        notes.append(f"{index.name}: entry {i} says offset {off} is at {pos}, but the batch there holds {bo}..{bo + lod} (stale)")
                        break
                last_off, last_pos = off, pos
        finally:
            os.close(fd)
    if not time_index.exists():
        notes.append(f"{time_index.name}: missing (rebuilt on recovery)")
    else:
        raw = time_index.read_bytes()
        if len(raw) % 12:
            notes.append(f"{time_index.name}: size {len(raw)} is not a multiple of 12 (stale; rebuilt on recovery)")
        last_ts = None
        for i, entry in enumerate(logfiles.iter_index(time_index)):
            if last_ts is not None and entry["timestamp"] < last_ts:
                notes.append(f"{time_index.name}: entry {i} timestamp decreases (stale)")
                break
            if entry["offset"] < base or (next_offset is not None and entry["offset"] >= next_offset):
                notes.append(f"{time_index.name}: entry {i} offset {entry['offset']} outside the segment (stale)")
                break
            last_ts = entry["timestamp"]
    return notes


def _scan_partition(pdir: Path) -> dict:
    """Scan every segment as recovery does (from offset 0): what would be cut, and index notes."""
    result = {"partition_dir": str(pdir), "segments": 0, "batches": 0, "bytes": 0, "log_end_offset": None,
              "corruption": [], "index_notes": []}
    expected = None
    files = logfiles.segment_files(pdir)
    for n, seg in enumerate(files):
        base = int(seg.name[:20])
        fd = os.open(seg, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            res = scan_file(fd, base, verify=True, expected_offset=expected)
        finally:
            os.close(fd)
        result["segments"] += 1
        result["batches"] += res.batches
        result["bytes"] += res.valid_bytes
        if res.cut_reason is not None:
            result["corruption"].append({"segment": seg.name, "position": res.valid_bytes,
                                         "bytes_removed": size - res.valid_bytes, "reason": res.cut_reason})
            for later in files[n + 1:]:
                result["corruption"].append({"segment": later.name, "position": 0, "bytes_removed": later.stat().st_size,
                                             "reason": "segment after the first corruption"})
            result["log_end_offset"] = res.next_offset if res.next_offset is not None else (expected or base)
            break
        result["index_notes"] += _check_index(seg, size, base, res.next_offset)
        if res.batches:
            expected = res.next_offset
        result["log_end_offset"] = expected if expected is not None else base
    return result


@app.command()
def verify(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="A partition dir (<topic>-<partition>) or a log dir."),
) -> None:
    """Check every batch (sizes, magic, CRC, offsets) and index; exit 1 when log data is corrupt."""
    fmt = output_format(ctx)
    results = [_scan_partition(p) for p in logfiles.partition_dirs(path)]
    corrupt = any(r["corruption"] for r in results)
    if fmt is OutputFormat.table:
        for r in results:
            state = "CORRUPT" if r["corruption"] else "ok"
            print(f"{r['partition_dir']}: {state}: {r['segments']} segment(s), {r['batches']} batch(es), "
                  f"{r['bytes']} valid bytes, log end offset {r['log_end_offset']}")
            for c in r["corruption"]:
                print(f"  corrupt: {c['segment']} at position {c['position']}: {c['reason']} ({c['bytes_removed']} bytes would be cut)")
            for note in r["index_notes"]:
                print(f"  index: {note}")
        print(f"{len(results)} partition(s) checked, {sum(bool(r['corruption']) for r in results)} corrupt")
    else:
        emit({"partitions": results, "corrupt": corrupt}, fmt)
    if corrupt:
        raise typer.Exit(EXIT_PROBLEM)


def _lock_broker_dirs(pdirs: list[Path]) -> LogDirLocks:
    """Lock the log dirs holding ``pdirs`` that a broker has used (they have a ``.lock``)."""
    dirs = sorted({p.parent for p in pdirs if (p.parent / LOCK_FILE).exists()})
    try:
        return lock_log_dirs(dirs)
    except LogDirInUseError as exc:
        raise CliError(f"{exc}: stop its broker first", EXIT_PROBLEM) from None


def _recover_partition(pdir: Path, dry_run: bool) -> dict:
    if dry_run:
        r = _scan_partition(pdir)
        return {"partition_dir": r["partition_dir"], "cuts": r["corruption"],
                "log_end_offset": r["log_end_offset"], "dry_run": True}
    if not os.access(pdir, os.W_OK):
        raise CliError(f"permission denied (recovery writes): {pdir}")
    log = Log.open(pdir, LogConfig(), recovery_point=0)
    try:
        report = log.recovery_report
        return {
            "partition_dir": str(pdir),
            "cuts": [{"segment": c.segment, "position": c.position, "bytes_removed": c.bytes_removed,
                      "reason": c.reason} for c in report.cuts],
            "log_end_offset": report.log_end_offset,
            "dry_run": False,
        }
    finally:
        log.close()


@app.command()
def recover(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="A partition dir (<topic>-<partition>) or a log dir."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report what would be cut; change nothing."),
) -> None:
    """Run the broker's start-up recovery offline: cut at the first invalid byte, rebuild indexes."""
    fmt = output_format(ctx)
    pdirs = logfiles.partition_dirs(path)
    locks = LogDirLocks({}) if dry_run else _lock_broker_dirs(pdirs)
    try:
        results = [_recover_partition(pdir, dry_run) for pdir in pdirs]
    finally:
        locks.release()
    if fmt is OutputFormat.table:
        for r in results:
            verb = "would cut" if r["dry_run"] else "cut"
            if not r["cuts"]:
                print(f"{r['partition_dir']}: clean, log end offset {r['log_end_offset']}")
            for c in r["cuts"]:
                print(f"{r['partition_dir']}: {verb} {c['bytes_removed']} bytes of {c['segment']} at position "
                      f"{c['position']}: {c['reason']}")
            if r["cuts"]:
                print(f"{r['partition_dir']}: log end offset {r['log_end_offset']}")
    else:
        emit({"partitions": results}, fmt)
