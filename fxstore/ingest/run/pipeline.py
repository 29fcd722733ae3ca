"""`fxstore ingest`: DBN MBP-10 files → instrument selection → bars → Parquet bar store.

Output: a new version of the series ``bars/<SYMBOL>/<instrument-key>/<bar-key>/``:
``v<NNNN>/<YYYY-MM-DD>.parquet`` (zstd, one per trading day, written atomically) and a
``manifest.json`` with the inputs and their checksums, the full config, the roll schedule and
per-day bar counts and checksums; then one atomic commit makes it the current version
(:func:`fxstore.store.commit_bar_version`). A killed build leaves the current version as it was.

Trading days are independent (each day's bars depend only on its records and the config),
so groups of files that no trading day crosses are built in a process pool. Workers write
their days' files themselves (:mod:`fxstore.ingest.run.day_files`). In front-month mode a
worker builds the two nearest live outrights of each day and the parent picks the front
month in trading-day order with the same causal selector a one-core run uses, moves that
file into place and, in the rare case that the front month was neither, builds the day again
itself; so the files are byte-identical for any worker count, chunk size or split of the
input into files. After each group the parent saves its progress; a killed run resumes from
there.

Files that chain into one group (UTC-day files, where each session starts in one file and
ends in the next) are split by trading day first when workers far outnumber groups
(:mod:`fxstore.ingest.run.resplit`); otherwise each such group, like one multi-day file, is
built by one worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import itertools
import logging
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path

import numpy as np

from fxstore.config import IngestConfig
from fxstore.errors import FxStoreError, InvalidInputError, StoreAccessError, SymbolNotFoundError
from fxstore.executor import RayPool, TaskPool, open_local_pool, open_ray_pool, require_ray
from fxstore.ingest.dbn.reader import DbnFile, DbnSource, open_dbn
from fxstore.ingest.run.day_builder import (
    Chooser,
    DayResult,
    GroupResult,
    GroupTask,
    ObjectIO,
    build_group,
)
from fxstore.ingest.run.day_files import (
    PARTS_DIR,
)
from fxstore.ingest.run.day_writer import DayWriter, Json, Request
from fxstore.ingest.run.dispatch import dispatch_order, in_order
from fxstore.ingest.run.manifest import (
    IngestSummary,
    summary_from_manifest,
    up_to_date_manifest,
    warn_ended_early,
    warn_if_target_missed,
    warn_implausible,
    write_manifest,
)
from fxstore.ingest.run.manifest import fingerprint as series_fingerprint
from fxstore.ingest.run.objects import (
    StagedParts,
    build_group_in_task,
    download_definitions,
    object_path,
    open_input_objects,
)
from fxstore.ingest.run.plan import expand_definitions, plan_ingest
from fxstore.ingest.run.pool import WarningsToParent, start_worker_server
from fxstore.ingest.run.progress import PROGRESS, ProgressLog, load_progress
from fxstore.ingest.run.resplit import SPLIT_DIR, build_split_groups, can_split
from fxstore.ingest.run.reuse import (
    as_digest,
    build_day,
    day_keys,
    find_reuse,
    input_digests,
    tasks_to_build,
)
from fxstore.ingest.select.coverage import (
    check_instrument_root,
    check_selection,
    describe_roots,
)
from fxstore.market.calendar import Sessions, sessions
from fxstore.remote import InputObject, bucket_of
from fxstore.store import (
    LOCK,
    commit_bar_version,
    discard_bar_stage,
    key_lock,
    list_bar_versions,
    os_errors,
    stage_bar_version,
)

__all__ = ["ingest", "plan_groups"]

logger = logging.getLogger(__name__)


def _file_days(file: DbnFile, table: Sessions) -> tuple[dt.date, dt.date] | None:
    """First and last trading day a file's records can belong to (None: no records)."""
    if file.first_ts_recv is None:
        return None
    end = file.metadata.end
    last_ts = max(file.first_ts_recv, end - 1) if end is not None else int(table.close_ns[-1]) - 1
    first, last = table.trading_day_of(np.array([file.first_ts_recv, last_ts], dtype=np.int64))
    return first.item(), last.item()


def plan_groups(files: Sequence[DbnFile], table: Sessions | None = None) -> list[list[DbnFile]]:
    """Split files (in ts_recv order) into groups that share no trading day (of `table`,
    default equity-index hours).

    A file's days run from its first record's to its metadata end's; files whose day spans
    touch are grouped, so a session split over two files (Databento's UTC-day batches) is
    built by one worker.
    """
    table = table if table is not None else sessions()
    groups: list[list[DbnFile]] = []
    last_day: dt.date | None = None
    for file in files:
        span = _file_days(file, table)
        if span is None:
            continue
        if groups and last_day is not None and span[0] <= last_day:
            groups[-1].append(file)
        else:
            groups.append([file])
        last_day = span[1] if last_day is None else max(last_day, span[1])
    return groups


def _describe_inputs(source: DbnSource) -> str:
    """ "the 38 input files (glbx-mdp3-20240220.mbp-10.dbn.zst … of ES.FUT)"."""
    files = source.files
    symbols = sorted({s for f in files for s in f.metadata.symbols})
    of = f" of {', '.join(symbols[:3])}" if symbols else ""
    if len(files) == 1:
        return f"the input file {files[0].path.name}{of}"
    return f"the {len(files)} input files ({files[0].path.name} …{of})"


def _group_key(group: Sequence[DbnFile]) -> str:
    return group[0].path.name


def _group_source(source: DbnSource, task: GroupTask) -> DbnSource:
    """The files of one group, as `source` already opened and checked them."""
    return DbnSource([f for f in source.files if f.path in task.paths], source.symbology)


def _run_groups(
    source: DbnSource,
    tasks: list[tuple[str, GroupTask]],
    workers: int,
    choose: Chooser | None,
    on_day: Callable[[DayResult], None] | None,
    writer: DayWriter,
    split: set[str],
    ray_pool: RayPool | None = None,
    objects: ObjectIO | None = None,
) -> Generator[tuple[str, GroupTask, GroupResult], None, None]:
    """Build groups in order: in-process (writing each day as it is built), or in a pool.

    In-process groups reuse the files `source` already opened and checked. Worker
    processes (or Ray tasks, with `ray_pool`) open theirs and write their days' files into
    the parts folder of `writer`, the last rounds largest first (:mod:`._dispatch`); the
    groups keyed in `split` are split into trading days first (:mod:`._resplit`). With
    `objects`, Ray tasks read their inputs from S3 and put their days' files in the store's
    bucket (:mod:`.objects`).
    """
    if ray_pool is None and (workers <= 1 or (len(tasks) <= 1 and not split)):
        for key, task in tasks:
            group = _group_source(source, task)
            yield key, task, build_group(task, choose=choose, on_day=on_day, source=group)
        return

    out_dir = writer.out_dir.absolute() if ray_pool is not None else writer.out_dir
    remote = functools.partial(_for_workers, writer=writer, ray=ray_pool is not None, io=objects)

    size = {f.path: f.size_bytes for f in source.files}
    with _pool(ray_pool, workers if split else min(workers, len(tasks))) as pool:
        for in_split, same in itertools.groupby(tasks, key=lambda kt: kt[0] in split):
            run = list(same)
            if in_split:
                results: Iterator[GroupResult | None] = build_split_groups(
                    pool,
                    [remote(t) for _, t in run],
                    out_dir / SPLIT_DIR,
                    workers,
                    source.symbology,
                )
            else:
                order = dispatch_order([sum(size[p] for p in t.paths) for _, t in run], workers)
                build = build_group_in_task if ray_pool is not None else build_group
                sent = pool.imap(build, [remote(run[i][1]) for i in order])
                results = in_order(sent, order)
            for (key, task), result in zip(run, results, strict=True):
                if result is None:  # overlapping files or in-stream symbol mappings
                    logger.info("%s: files overlap or map symbols: one core", task.paths[0])
                    result = build_group(task, source=_group_source(source, task))
                yield key, task, result


def _for_workers(task: GroupTask, writer: DayWriter, ray: bool, io: ObjectIO | None) -> GroupTask:
    """`task` as a worker process or Ray task gets it: where to put its days' files, and for
    tasks without a shared folder (`io`) its input objects and the store's parts folder."""
    if not ray:
        return dataclasses.replace(
            task, parts_dir=writer.out_dir / PARTS_DIR, metadata=writer.metadata
        )
    # Ray workers may run in another folder (or on another node): absolute paths.
    objects = None
    parts_dir = writer.out_dir.absolute() / PARTS_DIR
    in_bucket: set[Path] = set()
    if io is not None:
        in_bucket = {object_path(o) for o in io.inputs}
        mine = tuple(o for o in io.inputs if object_path(o) in task.paths)
        objects = dataclasses.replace(io, inputs=mine)
        if io.store is not None:
            parts_dir = writer.out_dir.absolute() / PARTS_DIR / Path(io.parts_rel).name
    paths = tuple(p if p in in_bucket else p.absolute() for p in task.paths)
    return dataclasses.replace(
        task, paths=paths, parts_dir=parts_dir, metadata=writer.metadata, objects=objects
    )


@contextlib.contextmanager
def _pool(ray_pool: RayPool | None, processes: int) -> Iterator[TaskPool]:
    """The Ray pool when there is one, else a local process pool for the block."""
    if ray_pool is not None:
        yield WarningsToParent(ray_pool)
        return
    with open_local_pool(processes) as pool:
        yield pool


#: Split groups by trading day only when there are at least this many workers per group.
#: Splitting costs about twice the work of building a group in one pass (the fragments are
#: written and read back: pool busy time over one core's time in
#: bench/results/ingest_scaling_utcday_h200host.json) and waits at two barriers a window:
#: there, 4 weekly groups split over 16 workers reached 3.1x, about what one group per
#: worker can give (4 groups of ~4 days each; estimated, not measured). It pays only with
#: few groups.
_SPLIT_WORKERS_PER_GROUP = 4


def _split_keys(source: DbnSource, tasks: list[tuple[str, GroupTask]], workers: int) -> set[str]:
    """Groups to split by trading day: chains of files, when workers far outnumber groups."""
    if workers <= 1 or len(tasks) * _SPLIT_WORKERS_PER_GROUP >= workers:
        return set()
    return {key for key, task in tasks if can_split(_group_source(source, task).files)}


def _rebuild_day(source: DbnSource, task: GroupTask, day: dt.date, instrument_id: int) -> DayResult:
    """Build one day of a group again, in-process, for the instrument the parent chose.

    Only needed when the front month was not among the worker's candidates (a contract
    beyond the two nearest led the previous day's volume).
    """
    logger.info("%s: building %s again for instrument %d", task.paths[0].name, day, instrument_id)
    result = build_group(
        task,
        choose=lambda d, _listed: {instrument_id} if d == day else set(),
        source=_group_source(source, task),
    )
    return next(d for d in result.days if d.day == day)


def _rebuild_day_in_task(
    pool: RayPool, task: GroupTask, day: dt.date, instrument_id: int
) -> DayResult:
    """:func:`_rebuild_day` in a Ray task (`task` as the workers get it): its inputs and
    day file stay where the tasks' are (S3)."""
    logger.info("%s: building %s again for instrument %d", task.paths[0].name, day, instrument_id)
    again = dataclasses.replace(task, only=(day, instrument_id))
    result = pool.map(build_group_in_task, [again])[0]
    return next(d for d in result.days if d.day == day)


@contextlib.contextmanager
def _opened_inputs(
    config: IngestConfig, paths: Sequence[Path | InputObject]
) -> Iterator[tuple[DbnSource, tuple[InputObject, ...], list[Path]]]:
    """The opened inputs: local files (and folders), or objects in S3 read by Ray tasks,
    opened from their first bytes here; and the definition files among them (those in S3
    downloaded into a temporary folder for the block: the plan reads them here)."""
    objects = tuple(p for p in paths if isinstance(p, InputObject))
    if not objects:
        source = open_dbn([p for p in paths if isinstance(p, Path)])
        yield source, (), [f.path for f in source.definitions]
        return
    if not config.executor.is_ray:
        raise InvalidInputError(
            f"{objects[0].url}: s3:// inputs are read where they are by the tasks of "
            "--executor ray; without Ray, download them first (the CLI does: "
            "fxstore.remote.fetch_inputs)."
        )
    if len(objects) < len(paths):
        local = next(p for p in paths if isinstance(p, Path))
        raise InvalidInputError(
            f"{local}: a local input among s3:// inputs; on a Ray cluster give all inputs as "
            "s3:// URLs (the nodes share no folder), or all as local paths."
        )
    source = open_input_objects(objects)
    with tempfile.TemporaryDirectory(prefix="fxstore-definitions-") as folder:
        yield source, objects, download_definitions(source, objects, Path(folder))


def _object_io(
    objects: tuple[InputObject, ...], store_root: Path, out_dir: Path
) -> ObjectIO | None:
    """What Ray tasks need to do their I/O in S3: their input objects, and for an s3://
    store its bucket and a parts folder of this run's own (None: all in shared folders)."""
    bucket = bucket_of(store_root)
    if bucket is None and not objects:
        return None
    if bucket is None:
        return ObjectIO(inputs=objects)
    parts = (out_dir / PARTS_DIR / f"run-{secrets.token_hex(6)}").relative_to(store_root)
    return ObjectIO(objects, bucket.url, bucket.endpoint, parts.as_posix())


def ingest(
    config: IngestConfig,
    paths: Sequence[Path | InputObject],
    store_root: Path,
    *,
    on_start: Callable[[int], None] | None = None,
    on_progress: Callable[[dt.date], None] | None = None,
) -> IngestSummary:
    """Build the bar store of `config.symbol` from DBN MBP-10 files.

    Parameters
    ----------
    config
        Symbol, instrument mode, bar type, workers.
    paths
        .dbn / .dbn.zst files and/or batch-download folders; or, on a Ray cluster
        (``config.executor``), DBN objects in S3 (:func:`fxstore.remote.list_input_objects`),
        which its tasks read where they are.
    store_root
        The store root; bars go to ``bars/<symbol>/<instrument-key>/<bar-key>/``.
    on_start
        Called once with the number of trading days the input files may hold.
    on_progress
        Called with each trading day once its file is written (or found finished).

    Raises
    ------
    InvalidInputError, SchemaError
        Bad paths or files (nothing is written), see :func:`fxstore.ingest.dbn.reader.open_dbn`.
    NoFrontMonthError
        Front-month mode and no outright of the symbol's root in the input.
    """
    started = time.perf_counter()
    if config.executor.is_ray:
        require_ray()  # before anything is opened or written
    elif config.workers > 1:
        start_worker_server()  # its boot overlaps opening the files
    with _opened_inputs(config, paths) as (source, objects, found_definitions):
        return _build_series(
            config,
            source,
            objects,
            found_definitions,
            store_root,
            started,
            on_start,
            on_progress,
        )


def _build_series(
    config: IngestConfig,
    source: DbnSource,
    objects: tuple[InputObject, ...],
    found_definitions: list[Path],
    store_root: Path,
    started: float,
    on_start: Callable[[int], None] | None,
    on_progress: Callable[[dt.date], None] | None,
) -> IngestSummary:
    """The body of :func:`ingest`, its inputs opened (and definition files among them
    found, downloaded when in S3)."""
    definitions = found_definitions + expand_definitions(config.definitions)
    plan = plan_ingest(config, definitions)
    check_selection(plan.selection, plan.root, source.symbology, _describe_inputs(source))
    check_instrument_root(plan.selection, plan.symbol, source.symbology, plan.master)
    series_dir = plan.out_dir(store_root)
    symbology = [config.symbology] if config.symbology is not None else []
    fingerprint = series_fingerprint(
        config,
        source.files,
        [*definitions, *plan.statistics_files, *symbology],
        {object_path(o): o.mtime_ns for o in objects},
    )
    # Up to date needs no lock: a read-only store (or a teammate's) is read as it is.
    found = None if config.force else _up_to_date(series_dir, fingerprint, started)
    if found is not None:
        return found
    with _new_folder_removed_on_error(series_dir, store_root), key_lock(series_dir):
        found = None if config.force else _up_to_date(series_dir, fingerprint, started)
        if found is not None:  # another process finished it while we waited for the lock
            return found
        # A new version beside the current one; a killed build of the same inputs resumes.
        out_dir = stage_bar_version(series_dir)
        done = {} if config.force else load_progress(out_dir, fingerprint)
        if not done:
            discard_bar_stage(out_dir)  # a killed build of other inputs: start afresh
        _remove_scratch(out_dir)  # a killed run's candidates and fragments
        writer = DayWriter(out_dir, plan)
        writer.requests = tuple(
            Request(f.metadata.start, f.metadata.end, f.metadata.limit) for f in source.files
        )
        io = _object_io(objects, store_root, out_dir) if config.executor.is_ray else None
        staged = None
        if io is not None and io.store is not None:
            bucket = bucket_of(store_root)
            assert bucket is not None
            staged = StagedParts(bucket, store_root, store_root / io.parts_rel)
            writer.staged = staged
        groups = plan_groups(source.files, plan.sessions)
        if config.workers > 1 and len(groups) == 1 and len(groups[0]) == 1:
            logger.info(
                "one multi-day file: its trading days are built on one core, not %d",
                config.workers,
            )
        if on_start is not None:
            on_start(_count_trading_days(groups, plan.sessions))
        tasks = []
        for group in groups:
            span = [_file_days(f, plan.sessions) for f in group]
            days = {d for s in span if s for d in plan.sessions.between(*s)}
            task = GroupTask(
                paths=tuple(f.path for f in group),
                days=frozenset(days) if len(groups) > 1 else None,
                plan=plan,
            )
            tasks.append((_group_key(group), task))
        spans = {f.path: s for g in groups for f in g if (s := _file_days(f, plan.sessions))}
        side = input_digests([*definitions, *plan.statistics_files, *symbology])
        # Ray tasks that read s3:// inputs build every day (their inputs are not hashed here).
        taken = (
            None
            if io is not None
            else find_reuse(config, series_dir, spans, side, plan, source.symbology)
        )
        if taken is not None:
            digests, reuse = taken
            writer.take_days(reuse)
            tasks = tasks_to_build(tasks, spans, reuse, plan.sessions)
            writer.build_day = functools.partial(build_day, plan, spans)
            writer.on_reused = on_progress
        with _stage_discarded_on_refusal(out_dir):
            try:
                # The workers' own scratch writes (fragments) too: their OSError names the folder.
                with os_errors(out_dir, "write into"):
                    built = _build_all(
                        config, source, writer, tasks, done, fingerprint, on_progress, io
                    )
                    inputs, truncated, n_records, n_skipped, build_s, passed_over = built
            except BaseException:
                if staged is not None:  # what it put in the bucket goes: no resume
                    with contextlib.suppress(FxStoreError):  # the error being raised says why
                        staged.clean()
                        staged.discard()
                        discard_bar_stage(out_dir)
                raise
            finally:
                _remove_scratch(out_dir)
            if staged is not None:
                staged.clean()
            if taken is not None:  # the files not read were never hashed by the reader
                inputs = [list(digests[p]) for g in groups for f in g if (p := f.path) in spans]
            keys = None
            if io is None:  # no keys for a build from s3:// inputs: a later one builds anew
                read = [p for g in groups for f in g if (p := f.path) in spans]
                named = dict(zip(read, inputs, strict=True))
                keys = day_keys(
                    plan,
                    {as_digest(named[p]): span for p, span in spans.items()},
                    side,
                    source.symbology,
                )
            if not any(int(e.get("n_kept", 0)) for e in writer.entries):
                raise SymbolNotFoundError(
                    f"{_describe_inputs(source)}: kept none of the {n_records:,} MBP-10 records "
                    f"read for --instrument-mode {plan.selection} of {plan.symbol}; they list "
                    f"{describe_roots(source.symbology)}. Check --symbol and --instrument-mode "
                    "(`fxstore scan` shows what the files hold)."
                )
            write_manifest(
                out_dir,
                writer,
                inputs,
                fingerprint,
                definitions,
                truncated,
                passed_over=passed_over,
                day_keys=keys,
            )
        commit_bar_version(series_dir, out_dir)
        warn_if_target_missed(plan, writer.entries)
        warn_implausible(plan, writer.entries)
        warn_ended_early(plan, writer.entries)
        (out_dir / PROGRESS).unlink(missing_ok=True)
    n_bars = sum(int(str(e["n_bars"])) for e in writer.entries)
    n_days = sum(1 for e in writer.entries if int(str(e["n_bars"])) > 0)
    return IngestSummary(
        out_dir=out_dir,
        n_days=n_days,
        days_written=len(writer.entries) - n_skipped - writer.n_reused,
        days_skipped=n_skipped,
        days_reused=writer.n_reused,
        # with days taken, the records of the series' days, read or not
        n_records=sum(int(e["n_records"]) for e in writer.entries)
        if writer.n_reused
        else n_records,
        n_kept=sum(int(e.get("n_kept", 0)) for e in writer.entries),
        n_bars=n_bars,
        schedule=tuple(writer.selector.schedule) if writer.selector else (),
        elapsed_s=time.perf_counter() - started,
        build_s=build_s,
        up_to_date=False,
    )


def _up_to_date(series_dir: Path, fingerprint: str, started: float) -> IngestSummary | None:
    """The summary of the current version when it was built from the same inputs and config."""
    versions = list_bar_versions(series_dir)
    current = next((v for v in versions if v.is_current), None)
    manifest = None if current is None else up_to_date_manifest(current, fingerprint)
    if current is None or manifest is None:
        return None
    return summary_from_manifest(current.folder, manifest, started)


@contextlib.contextmanager
def _new_folder_removed_on_error(out_dir: Path, store_root: Path) -> Iterator[None]:
    """On an error, remove the series folder (and its empty parents below the store root)
    if this run created it and nothing but its lock file is in it: a refused first run
    leaves nothing behind."""
    created = [
        p
        for p in (out_dir, *out_dir.parents)
        if p != store_root and p.is_relative_to(store_root) and not p.exists()
    ]
    try:
        yield
    except BaseException:
        if created and (not out_dir.is_dir() or {p.name for p in out_dir.iterdir()} <= {LOCK}):
            with contextlib.suppress(OSError):  # the error being raised says why
                (out_dir / LOCK).unlink(missing_ok=True)
            for folder in created:  # deepest first
                with contextlib.suppress(OSError):
                    folder.rmdir()
        raise


@contextlib.contextmanager
def _stage_discarded_on_refusal(out_dir: Path) -> Iterator[None]:
    """Delete the uncommitted version `out_dir` when the build is refused (bad inputs, facts
    or config: they must change to fix it, and a change starts the build afresh, so nothing
    in it could be resumed). A kill, or a failure of the store itself (disk full, read-only:
    StoreAccessError), keeps it, to resume once fixed."""
    try:
        yield
    except FxStoreError as err:
        if not isinstance(err, StoreAccessError):
            with contextlib.suppress(FxStoreError):  # the refusal being raised says why
                discard_bar_stage(out_dir)
        raise


def _remove_scratch(out_dir: Path) -> None:
    """Delete the workers' parts and fragments folders (nothing there outlives a run)."""
    for scratch in (PARTS_DIR, SPLIT_DIR):
        shutil.rmtree(out_dir / scratch, ignore_errors=True)


def _count_trading_days(groups: Sequence[Sequence[DbnFile]], table: Sessions) -> int:
    """Trading days the groups' files may hold (for a progress bar)."""
    days: set[dt.date] = set()
    for group in groups:
        for file in group:
            span = _file_days(file, table)
            if span is not None:
                days.update(table.between(*span))
    return len(days)


def _build_all(
    config: IngestConfig,
    source: DbnSource,
    writer: DayWriter,
    tasks: list[tuple[str, GroupTask]],
    done: Json,
    fingerprint: str,
    on_progress: Callable[[dt.date], None] | None,
    io: ObjectIO | None = None,
) -> tuple[list[list[object]], dict[str, list[int]], int, int, float, dict[str, dict[str, int]]]:
    """Replay finished groups, build the rest in order, save progress after each group.

    Returns the inputs (name, size, sha256), the truncated ones (see
    ``ReadStats.truncated``), the records read, the days replayed, the seconds spent
    building groups and the inputs with records passed over (``ReadStats.passed_over``).
    """
    resumed: dict[str, Json] = {}
    inputs: list[list[object]] = []
    truncated: dict[str, list[int]] = {}
    passed_over: dict[str, dict[str, int]] = {}
    n_records = 0
    build_s = 0.0
    pending = list(tasks)
    while pending and pending[0][0] in done:  # only a finished prefix can be trusted
        key, _ = pending.pop(0)
        saved: Json = done[key]
        for entry in saved["days"]:
            writer.replay(entry)
            if on_progress:
                on_progress(dt.date.fromisoformat(entry["trading_day"]))
        inputs += saved["inputs"]
        truncated |= saved.get("truncated", {})
        passed_over |= saved.get("passed_over", {})
        n_records += int(saved["n_records"])
        resumed[key] = saved
    n_replayed = len(writer.entries)

    def write(day: DayResult) -> None:
        entry = writer.write(day)
        day.bars.clear()  # written: free the memory
        if on_progress and entry is not None:  # a day taken is told when it is written
            on_progress(day.day)

    with contextlib.ExitStack() as stack:
        ray_pool = None
        if config.executor.is_ray and pending:
            ray_pool = stack.enter_context(open_ray_pool(config.executor, config.workers or None))
        workers = ray_pool.workers if ray_pool is not None else config.workers
        # Splitting by trading day shares a fragments folder: not across nodes without one.
        split = _split_keys(source, pending, workers) if io is None else set()
        in_process = ray_pool is None and (workers <= 1 or (len(pending) <= 1 and not split))
        choose = writer.begin if in_process and writer.selector is not None else None
        on_day = write if in_process else None
        groups = _run_groups(source, pending, workers, choose, on_day, writer, split, ray_pool, io)
        log = ProgressLog(writer.out_dir, fingerprint, resumed)
        stack.enter_context(log)
        stack.enter_context(contextlib.closing(groups))  # on an error, stop the pool first
        logged = len(writer.entries)
        for key, task, result in groups:
            if io is not None and ray_pool is not None:
                task = _for_workers(task, writer, ray=True, io=io)
                writer.rebuild = functools.partial(_rebuild_day_in_task, ray_pool, task)
            else:
                writer.rebuild = functools.partial(_rebuild_day, source, task)
            if not in_process:
                for day in result.days:
                    write(day)
            log.append(
                key,
                {
                    "days": writer.entries[logged:],  # with the days taken before them
                    "inputs": [list(i) for i in result.inputs],
                    "truncated": result.truncated,
                    "passed_over": result.passed_over,
                    "n_records": result.n_records,
                },
            )
            logged = len(writer.entries)
            inputs += [list(i) for i in result.inputs]
            truncated |= result.truncated
            passed_over |= result.passed_over
            n_records += result.n_records
            build_s += result.build_s
    writer.finish()  # the days taken after the last one built
    return inputs, truncated, n_records, n_replayed, build_s, passed_over
