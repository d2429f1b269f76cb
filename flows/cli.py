"""`flywheel` command line: run the nightly flywheel, look at what is in production,
promote a candidate or roll back, write a settings file, or serve the local model."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import sys
import traceback
import warnings
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from flows.plumbing.door import door, night_door
from flows.plumbing.environment import prepare_environment
from flows.plumbing.private_state import private_state
from infra.settings import Settings

console = Console(stderr=True)

# Exit codes, for schedulers and scripts (also in `flywheel --help`).
OK = 0
NIGHT_FAILED = 1  # the night stopped midway; `flywheel run --resume RUN_ID` goes on
USAGE = 2  # a wrong command or option, or settings that cannot load (the sentence says)
LOCKED = 3  # another night or production move holds the state folder's lock
GATE_REFUSED = 4  # the gate refused the candidate (a night's, or `promote`'s); nothing moved
EXIT_CODES = """exit codes:
  0  done (for `run`: its candidate passed the gate, promoted or awaiting approval)
  1  the night failed midway: `flywheel run --resume RUN_ID` goes on from there
  2  a wrong command or option, or settings that cannot load (one sentence says which)
  3  another night or production move holds this state folder's lock
  4  the gate refused the candidate (the night's, or the one `promote` named): nothing moved"""


def _run(args: argparse.Namespace) -> int:
    from flows.night.run_id import RUN_ID_FORMAT, check_run_id
    from infra.settings_errors import load_settings

    settings = load_settings()
    run_id = check_run_id(args.resume) if args.resume else datetime.now(UTC).strftime(RUN_ID_FORMAT)
    with night_door(settings, run_id) as rt:
        from flows.nightly import nightly
        from flows.plumbing.prefect_server import night_prefect
        from flows.report.summary import print_summary
        from infra.errors import UserFacingError

        state = escape(str(settings.state_dir.resolve()))
        with night_prefect() as where:
            console.print(
                f"flywheel night [bold]{run_id}[/] — state in {state}, runs on {where}",
                soft_wrap=True,
            )
            try:
                report = asyncio.run(nightly(run_id=run_id, knobs=settings.knobs(), runtime=rt))
            except UserFacingError:
                raise
            except Exception as error:  # a night's end: one sentence, the traceback kept
                _night_failed(rt.run_dir(run_id), run_id, error)
                return NIGHT_FAILED
    print_summary(report, Console())
    if report.promotion is not None and not report.promotion.passed:
        # the summary says it too; this is the one line a scheduler's log keeps
        console.print(
            f"flywheel: the gate refused night {run_id}'s candidate: {report.promotion.reason}",
            markup=False,
            soft_wrap=True,
        )
        return GATE_REFUSED
    return OK


def _night_failed(run_dir: Path, run_id: str, error: Exception) -> None:
    """The traceback goes to the run's folder, the person gets a sentence and the way on."""
    trace = run_dir / "error.txt"
    trace.write_text("".join(traceback.format_exception(error)))
    # one line, as every error the command ends with: a scheduler's log keeps it whole
    console.print(
        f"[red]flywheel: night {run_id} failed: {type(error).__name__}: {escape(str(error))}[/]"
        f" — every finished stage is kept; `flywheel run --resume {run_id}` goes on from the "
        f"one that failed; the traceback is in {trace}.",
        soft_wrap=True,
    )


def _move(args: argparse.Namespace) -> int:
    """Promote or roll back, as a Prefect flow run; a refused one exits GATE_REFUSED."""
    from infra.settings_errors import load_settings

    by = args.by or getpass.getuser()
    with door(load_settings(), f"`flywheel {args.command}` by {by}"):
        from flows.plumbing.prefect_server import night_prefect
        from flows.production.moves import promote_flow, rollback_flow

        with night_prefect():
            if args.command == "promote":
                move = asyncio.run(promote_flow(version=args.version, by=by))
            else:
                move = asyncio.run(rollback_flow(by=by))
    if move.action == "refused":  # a non-zero exit says why on stderr, in one line
        console.print(f"flywheel: {move.line()}", markup=False, soft_wrap=True)
        return GATE_REFUSED
    _print_lines([move.line()])
    return OK


def _status(args: argparse.Namespace) -> int:
    from infra.settings_errors import load_settings

    settings = load_settings()
    prepare_environment(settings.state_dir)
    # no lock: status reads while a night runs; what it makes (MLflow's store, the first
    # time) is as private as what a night makes
    with private_state(settings.state_dir):
        return _print_status(settings, as_json=args.json)


def _print_status(settings: Settings, as_json: bool) -> int:
    from flows.production.moves import production_hub
    from flows.production.serving import (
        finish_interrupted,
        make_serving,
        serving_lines,
        serving_state,
    )
    from flows.report.status import render, status_data
    from infra.registry.mlflow_registry import Registry

    registry = Registry(settings.mlflow)
    served = make_serving(settings)
    model = settings.registry.model_name
    # production as a cut move meant it, before it is shown
    finished = asyncio.run(finish_interrupted(served, registry, model, production_hub(settings)))
    data = status_data(registry, settings, finished=finished)
    if as_json:  # for scripts and dashboards: the same facts, with the server's
        if served is not None:
            data["serving"] = asyncio.run(serving_state(served, registry, model))
        print(json.dumps(data, indent=2))
        return OK
    lines = render(data)
    if served is not None:  # what the server holds beside what the registry says
        lines += asyncio.run(serving_lines(served, registry, model))
    _print_lines(lines)
    return OK


def _serving(args: argparse.Namespace) -> int:
    """Re-sync the serving server with the registry, as a Prefect flow run."""
    from infra.settings_errors import load_settings

    # it loads and unloads adapters on the server, as a promotion does: one at a time
    with door(load_settings(), "`flywheel serving sync`"):
        from flows.plumbing.prefect_server import night_prefect
        from flows.production.moves import serving_sync_flow

        with night_prefect():
            done = asyncio.run(serving_sync_flow())
    _print_lines(done)
    return OK


def _print_lines(lines: list[str]) -> None:
    """Lines on stdout as they are: never wrapped at the console's width, so a script
    that greps them, or a log that keeps them, sees each whole (a terminal wraps them)."""
    out = Console()
    for line in lines:
        out.print(line, markup=False, soft_wrap=True)


def _init(args: argparse.Namespace) -> int:
    """Write the commented settings file for Langfuse + MLflow + vLLM."""
    from importlib.resources import files

    from infra.errors import UserFacingError

    target = Path(args.path)
    if target.exists() and not args.force:
        raise UserFacingError(f"{target} exists already: edit it, or pass --force to replace it.")
    target.write_text(files("infra.deploy").joinpath("flywheel.toml").read_text())
    console.print(
        f"Wrote {target}: put the secrets its first lines name in the environment, "
        "then `flywheel run`."
    )
    return OK


def _serve(args: argparse.Namespace) -> int:
    from infra.lm.engine.server import serve
    from infra.settings_errors import load_settings

    serve(load_settings().lm, host=args.host, port=args.port, adapter_path=args.adapter)
    return OK


def main(argv: list[str] | None = None) -> int:
    # transformers warns about its own internals on every LoRA round; nothing to act on
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    args = _parser().parse_args(argv)  # a usage error exits USAGE (argparse's own 2)
    if args.config:  # before anything reads the settings
        os.environ["FLYWHEEL_CONFIG"] = args.config
    from flows.plumbing.night_lock import NightRunning
    from infra.errors import UserFacingError

    try:
        return args.handler(args)
    except UserFacingError as err:
        # one line whatever the terminal's width; "[lm]" is text, not markup
        console.print(f"[red]flywheel: {escape(str(err))}", soft_wrap=True)
        return LOCKED if isinstance(err, NightRunning) else USAGE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flywheel",
        description=__doc__,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"flywheel {_version()}")
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="the settings file (default: FLYWHEEL_CONFIG, else ./flywheel.toml)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the nightly flywheel once (Prefect, ephemeral mode)")
    run.add_argument(
        "--resume", metavar="RUN_ID", help="continue a failed night; finished stages are reused"
    )
    run.set_defaults(handler=_run)
    status = sub.add_parser("status", help="production, the candidate, history, last nights")
    status.add_argument("--json", action="store_true", help="as JSON, the server's state included")
    status.set_defaults(handler=_status)
    promote = sub.add_parser(
        "promote", help="move production to a version that passes the promotion gate"
    )
    promote.add_argument("version", nargs="?", type=int, help="default: the candidate")
    promote.add_argument("--by", help="who approves (default: the user name)")
    promote.set_defaults(handler=_move)
    rollback = sub.add_parser("rollback", help="move production back to the version before")
    rollback.add_argument("--by", help="who rolls back (default: the user name)")
    rollback.set_defaults(handler=_move)
    init = sub.add_parser("init", help="write a commented flywheel.toml for Langfuse, MLflow, vLLM")
    init.add_argument("--path", default="flywheel.toml")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.set_defaults(handler=_init)
    serving = sub.add_parser(
        "serving", help="the serving server: `sync` loads production's adapter, unloads old ones"
    )
    serving.add_argument("action", choices=["sync"])
    serving.set_defaults(handler=_serving)
    serve = sub.add_parser("serve-model", help="serve the local model as an OpenAI-compatible API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--adapter", help="a LoRA adapter folder to serve on top of the base model")
    serve.set_defaults(handler=_serve)
    return parser


def _version() -> str:
    try:
        return metadata.version("flywheel")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
