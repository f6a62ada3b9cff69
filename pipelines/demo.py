"""``make demo``: the real job on real transcripts, out of the box - including a
backfill after a prompt revision, as a user lives it.

1. builds an archive from the bundled Critical Role sample (CRD3, CC BY-SA 4.0,
   see sample/data/ATTRIBUTION.md) with the SIMULATED producer (a stand-in
   for an LLM, with known injected defects and a ground-truth file). The first
   attempts of one family (``--revised-family``, spells by default) were made
   under an earlier wording of its prompt, kept in ``sample/prompts/``; the
   installed assets are the revised version. Some attempts that pass every rule
   carry a semantic defect only a judge sees (``--judge-defects``). Attempts carry the usage a
   provider could have billed for them (``--usage``, simulated from their bytes; one in ten
   without); the demo prices tokens with ``sample/prices.example.json``: an EXAMPLE with invented
   numbers, not any provider's prices;
2. run 1 of the job with ``--refresh-stale --judges all`` (DirectRunner, Avro
   outputs): those slots show as stale, and each gets one refresh request; every
   other attempt that passes the rules gets its judge requests;
3. ``export-batch`` turns run 1's refresh, retry and judge requests into an OpenAI batch file;
4. the SIMULATED batch provider answers the refreshes and retries under the current
   prompt, the SIMULATED judge the judge requests, in the provider's own output format;
5. ``import-batch`` brings the answers back as candidates and the verdicts as verdict
   records, added to the archive;
6. the judges' round: the job over the archive writes judge requests for the new
   answers, which go out, are answered by the simulated judge and come back the same way;
7. run 2 of the job accepts the new, current attempts over the old ones and applies
   every verdict: a judge's fail becomes a retry whose guidance says what was found;
8. ``compare`` sets run 1 beside run 2, slot by slot (``compare/``: what changed and why).

Each run gets its retry economy (against the ground truth), what it cost (its attempts per family
and verdict, its judges, its open requests, the retries canonicalization saved) and a
self-contained HTML report: ``run1/report.html``, and ``report.html`` for run 2.

Exits non-zero when a job fails, conservation does not hold, a retry request
leaks internal text or a failing slot does not get exactly one, or the
revision loop does not close (run 2 must take its artifacts of the revised
family from the current prompt and plan no second refresh).
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m pipelines.demo`: its first steps, then this module imported as itself
    from pipelines.entry import run_module

    run_module("pipelines.demo")

import argparse
import os
from importlib import resources
from pathlib import Path

from apache_beam.io.filesystems import FileSystems

from pipelines import batch_export, batch_import, compare, demo_folder, reprocess, report, retry_economy
from pipelines.truth import ground_truth
from pipelines.guards import claimed_output
from pipelines.options import read_prices
from pipelines.outputs import read_manifest
from pipelines.run_cost import Target, cost_lines
from domain.errors import Refused
from domain.manifest import refresh_reasons
from pipelines.interruption import command_named, signals_deferred
from pipelines.folders import FolderLockedError, check_output_folder, folder_state, inner_locks_held
from transforms.files import OUTPUT_FORMATS
from sample import simulated_batch, simulated_judge, simulated_producer

SAMPLE_TRANSCRIPTS = "data/crd3-sample.transcripts.jsonl.gz"
REVISED_FAMILY = "spells"
BATCH_MODEL = "sim-2"  # the simulated model after the revision


EXAMPLE_PRICES = "prices.example.json"  # invented numbers for the simulated models: an EXAMPLE, not real prices


def bundled_transcripts() -> Path:
    return Path(str(resources.files("sample").joinpath(SAMPLE_TRANSCRIPTS)))


def example_prices() -> Path:
    return Path(str(resources.files("sample").joinpath(EXAMPLE_PRICES)))


def _figures(job_out: Path, truth: Path, folder: Path, comparison=None) -> retry_economy.RunFigures:
    """Retry economy, cost and report of one run, written to ``folder`` (with ``comparison``: (document, link
    to its page), what changed since the baseline run). The open requests are priced as export-batch would
    send them: to the simulated batch provider's model."""
    figures = retry_economy.load_figures(job_out, ground_truth(truth))
    for line in retry_economy.summary_lines(figures):
        print(f"  {line}")
    prices = example_prices()
    cost = report.figures_cost(figures, read_prices(str(prices)), str(prices),
                               Target(simulated_batch.PROVIDER, BATCH_MODEL), prog=PROG)
    for line in cost_lines(cost):
        print(f"  {line}")
    retry_economy.write_json(figures, folder / "retry_economy.json")
    print(f"  report: {report.write_report(figures, folder / 'report.html', comparison, cost)}")
    return figures


def revision_lines(family: str, run1: dict, run2: dict, imported: int) -> list[str]:
    """The revision's loop in a few lines; the refresh counts in the words of the job's summary (a slot to
    refresh rests only on an earlier prompt, or is a reconciliation waiting for its entry list)."""
    before, after = run1["refresh"]["by_family"][family], run2["refresh"]["by_family"][family]
    lines = [
        f"prompt revision of {family}:",
        f"  run 1: {refresh_reasons(before)[0]} slots rested only on the earlier prompt; "
        f"{before['refresh_requests']} refresh requests ({before['excerpt_chars']:,} excerpt characters)",
        f"  backfill: {imported} answers imported under the current prompt",
        f"  run 2: {after['artifacts_current']} of {after['artifacts_current'] + after['artifacts_stale']} artifacts "
        f"from the revised prompt ({after['current_over_stale']} replaced an answer to the earlier one); "
        f"{refresh_reasons(after)[0]} {family} slots left on the earlier prompt",
    ]
    requests = run2["refresh"]["refresh_requests"]
    if requests:
        stale, waiting = refresh_reasons(run2["refresh"])
        lines.append(f"  run 2 wrote {requests} refresh request(s): {stale} for slots resting only on an earlier "
                     f"prompt, {waiting} for reconciliation slots deferred, waiting for their entry list (their chunk "
                     "registries changed, not their prompt)")
    return lines


def revision_closed(family: str, run1: dict, run2: dict) -> bool:
    before, after = run1["refresh"]["by_family"][family], run2["refresh"]["by_family"][family]
    return (before["refresh_requests"] > 0 and after["refresh_requests"] == 0
            and after["current_over_stale"] > 0 and after["artifacts_current"] > before["artifacts_current"])


PROG = "python -m pipelines.demo"


@command_named(PROG)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--output", default="out/demo", help="Folder for the archive, the job outputs and the reports.")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--output-format", default="avro", choices=OUTPUT_FORMATS)
    parser.add_argument("--transcripts", type=Path, default=None,
                        help="transcript records to simulate from (default: the bundled CRD3 sample)")
    parser.add_argument("--candidates", type=int, default=None,
                        help="about this many candidates (default: every slot of the sample)")
    parser.add_argument("--defect-rate", action="append", default=[], metavar="NAME=P",
                        help="override a defect rate of the simulated producer (repeatable)")
    parser.add_argument("--revised-family", default=REVISED_FAMILY,
                        help=f"the family whose prompt was revised (default {REVISED_FAMILY})")
    args, beam_args = parser.parse_known_args(argv)

    # The demo's folder is claimed like every command's (pipelines.guards): not the root, creatable, one
    # writer at a time. A rerun replaces what an earlier demo wrote there, and only when it completes
    # (pipelines.demo_folder); any other folder that holds something is refused.
    inputs = {"--transcripts": str(args.transcripts)} if args.transcripts else {}
    folder = check_output_folder(args.output, inputs, [DEMO_MARK]).folder  # the root, glob characters, a file
    if folder_state(folder) == "not-empty" and not is_earlier_demo(folder):
        raise Refused(f"--output {args.output!r} holds files that are not an earlier demo's; choose an "
                      f"empty folder (the demo replaces only what it wrote itself)")
    with claimed_output(PROG, args.output, inputs=inputs, writes=[DEMO_MARK], overwrite=False,
                        keep_contents=True) as claimed:
        return _replace_earlier_demo(args, beam_args, claimed)


DEMO_MARK = demo_folder.MARK


def is_earlier_demo(folder: str) -> bool:
    """A folder an earlier demo wrote: its mark, an aside folder of a demo killed there, or (demos before the
    mark) its ground-truth file."""
    return (os.path.exists(os.path.join(folder, DEMO_MARK)) or demo_folder.has_aside(folder)
            or os.path.isfile(os.path.join(folder, "archive", "ground-truth.jsonl")))


def _replace_earlier_demo(args, beam_args: list[str], root: str) -> int:
    """Build the next demo in ``root`` with the earlier one set aside; it replaces the earlier one only when
    every step ran (on any other way out the earlier one is put back). Nothing else in ``root`` moves."""
    try:
        demo_folder.recover(root)
    except OSError as exc:
        raise Refused(f"a demo killed in {root} left its earlier state aside, and it cannot go back "
                      f"({exc}); move that out of the way and run the demo again") from None
    foreign = demo_folder.not_the_demos(root)
    if foreign:
        raise Refused(f"{os.path.join(root, foreign[0])}"
                      + (f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else "")
                      + f" is not the demo's: move it out of {', '.join(demo_folder.OWN_FOLDERS)}, which a rerun "
                      f"replaces (the demo never deletes what it did not write)")
    previous = None
    try:
        try:
            with inner_locks_held(root):  # no command writes a folder the demo moves
                with signals_deferred():  # a signal meanwhile comes once ``previous`` is known
                    previous = demo_folder.set_aside(root)
        except FolderLockedError as exc:
            raise Refused(f"{exc.folder} is being written by {exc.holder}; the demo replaces its "
                          f"folders only when no command writes them") from None
        except OSError as exc:
            raise Refused(f"the earlier demo in {root} cannot be set aside ({exc.strerror or exc}); "
                          f"nothing moved") from None
        status, complete = _run(args, beam_args, Path(root))
    except BaseException:
        if previous is not None:
            demo_folder.put_back(root, previous)
        raise
    if not complete:
        demo_folder.put_back(root, previous)
        if demo_folder.own_entries(root):
            print(f"the earlier demo is back in place in {root}")
        return status
    demo_folder.write_record(root, PROG)  # the commit: from here on the new state is the demo
    demo_folder.discard(root, previous)
    return status


def _run(args, beam_args: list[str], root: Path) -> tuple[int, bool]:
    """Every step into ``root``: the exit status, and whether every step ran (a job that fails stops it)."""
    archive, run1, run2, backfill = root / "archive", root / "run1", root / "run2", root / "backfill"
    truth, truth_backfill = archive / "ground-truth.jsonl", archive / "ground-truth-backfill.jsonl"
    transcripts, imported_candidates = archive / "transcripts.jsonl.gz", archive / "candidates-backfill.jsonl"
    verdicts = archive / "verdicts-backfill.jsonl"
    comparison = root / "compare"
    archive.mkdir(parents=True, exist_ok=True)

    print(f"prices: {example_prices()} (an EXAMPLE: invented numbers for the simulated models, not real prices)")
    print(f"1/8 simulated producer -> {archive} (first {args.revised_family} attempts under the earlier prompt; "
          "semantic defects only a judge sees; billed usage on the attempts)")
    simulated_producer.main([
        "--transcripts", str(args.transcripts or bundled_transcripts()),
        "--transcripts-out", str(transcripts),
        "--candidates-out", str(archive / "candidates.jsonl.gz"),
        "--truth-out", str(truth),
        "--seed", str(args.seed),
        "--reconciliations",
        "--revised-family", args.revised_family,
        "--judge-defects",
        "--usage",
        *(["--candidates", str(args.candidates)] if args.candidates else []),
        # Only the revision makes attempts stale here (user overrides come after and win).
        "--defect-rate", "stale_prompt_fingerprint=0",
        *(option for rate in args.defect_rate for option in ("--defect-rate", rate)),
    ])
    job = ["--transcripts", str(transcripts), "--output-format", args.output_format, "--refresh-stale",
           "--judges", "all", *beam_args]

    print(f"2/8 reprocess job, run 1 (--refresh-stale --judges all) -> {run1}")
    status = reprocess.main([*job, "--candidates", str(archive / "candidates.jsonl.gz"), "--output", str(run1)])
    if status != 0:
        return status, False
    figures1 = _figures(run1, truth, run1)

    print(f"3/8 export-batch: the refresh, retry and judge requests -> {backfill / 'batch'}")
    export = batch_export.run([
        "--retry-requests", str(run1 / "retry_requests" / "part-*"), "--transcripts", str(transcripts),
        "--provider", simulated_batch.PROVIDER, "--model", BATCH_MODEL, "--prices", str(example_prices()),
        "--output", str(backfill / "batch"), *beam_args])
    print("  " + batch_export.format_summary(export).replace("\n", "\n  "))

    print(f"4/8 simulated batch provider and simulated judge answer them -> {backfill / 'results'}")
    results, judged = backfill / "results" / "batch_output.jsonl", backfill / "results" / "judge_output.jsonl"
    simulated_batch.main(["--requests", str(backfill / "batch" / "requests-*"), "--transcripts", str(transcripts),
                          "--results-out", str(results), "--truth-out", str(truth_backfill), "--seed", str(args.seed)])
    simulated_judge.main(["--requests", str(backfill / "batch" / "requests-*"), "--truth", str(truth),
                          "--results-out", str(judged), "--answers-out", str(backfill / "results" / "judge_answers.jsonl"),
                          "--seed", str(args.seed)])

    print(f"5/8 import-batch -> {backfill / 'import'}; the answers and the verdicts join the archive")
    imported = batch_import.run(["--provider", simulated_batch.PROVIDER, "--results", str(results), str(judged),
                                 "--requests", str(backfill / "batch" / "requests-*"),
                                 "--output", str(backfill / "import")])
    print("  " + batch_import.format_summary(imported).replace("\n", "\n  "))
    FileSystems.copy([str(backfill / "import" / batch_import.CANDIDATES)], [str(imported_candidates)])
    FileSystems.copy([str(backfill / "import" / batch_import.VERDICTS)], [str(verdicts)])
    truth_all = backfill / "ground-truth.jsonl"
    truth_all.write_bytes(truth.read_bytes() + truth_backfill.read_bytes())

    # The answers are new attempts: the judges see them before they are accepted (contract §4.3).
    print(f"6/8 the judges' round: run 1's answers judged -> {backfill / 'judging'}")
    judging = backfill / "judging"
    status = reprocess.main([*job, "--candidates", str(archive / "candidates*"), "--verdicts", str(verdicts),
                             "--output", str(judging / "run"), "--progress-seconds", "0"])
    if status != 0:
        return status, False
    batch_export.run([
        "--retry-requests", str(judging / "run" / "retry_requests" / "part-*"), "--transcripts", str(transcripts),
        "--provider", simulated_batch.PROVIDER, "--model", BATCH_MODEL, "--kinds", "judge",
        "--output", str(judging / "batch"), *beam_args])
    simulated_judge.main(["--requests", str(judging / "batch" / "requests-*"), "--truth", str(truth_all),
                          "--results-out", str(judging / "results" / "judge_output.jsonl"),
                          "--answers-out", str(judging / "results" / "judge_answers.jsonl"), "--seed", str(args.seed)])
    judged_again = batch_import.run(["--provider", simulated_batch.PROVIDER,
                                     "--results", str(judging / "results" / "judge_output.jsonl"),
                                     "--requests", str(judging / "batch" / "requests-*"),
                                     "--output", str(judging / "import")])
    print(f"  {judged_again['verdicts_written']} more verdicts")
    verdicts.write_bytes(verdicts.read_bytes() + (judging / "import" / batch_import.VERDICTS).read_bytes())

    print(f"7/8 reprocess job, run 2 (every answer and verdict) -> {run2}")
    status = reprocess.main([*job, "--candidates", str(archive / "candidates*"), "--verdicts", str(verdicts),
                             "--output", str(run2)])
    if status != 0:
        return status, False

    print(f"8/8 compare run 1 with run 2 -> {comparison}")
    document, folder = compare.compare([str(run1), str(run2), "--output", str(comparison),
                                        "--prices", str(example_prices()), *beam_args])
    print("  " + compare.format_summary(document, folder).replace("\n", "\n  "))
    figures2 = _figures(run2, truth_all, root, (document, f"{comparison.name}/{compare.COMPARE_HTML}"))

    manifest1, manifest2 = read_manifest(run1), read_manifest(run2)
    for line in revision_lines(args.revised_family, manifest1, manifest2, imported["requests"]["imported"]):
        print(line)
    closed = revision_closed(args.revised_family, manifest1, manifest2)
    if not closed:
        print("the revision loop did not close (see the refresh section of the reports)")
    return (0 if figures1.ok and figures2.ok and closed else 1), True

