"""`flywheel` command line: run the nightly flywheel, look at what is in production,
promote a candidate or roll back, write a settings file, or serve the local model."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
import traceback
import warnings
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from flows.environment import prepare_environment

console = Console(stderr=True)


def _run(args: argparse.Namespace) -> int:
    from infra.settings import Settings

    settings = Settings()
    prepare_environment(settings.state_dir)
    from flows.night_lock import one_night
    from flows.nightly import nightly
    from flows.prefect_server import night_prefect
    from flows.report import print_summary
    from flows.runtime import RUN_ID_FORMAT, Runtime, check_run_id
    from infra.errors import UserFacingError

    run_id = check_run_id(args.resume) if args.resume else datetime.now(UTC).strftime(RUN_ID_FORMAT)
    # before anything opens the folder's stores: a second night must not race on them
    with one_night(settings.state_dir, run_id, settings.state.wait_for_night_s):
        rt = Runtime(settings)
        rt.preflight()
        state = settings.state_dir.resolve()
        with night_prefect() as where:
            console.print(f"flywheel night [bold]{run_id}[/] — state in {state}, runs on {where}")
            try:
                report = asyncio.run(nightly(run_id=run_id, knobs=settings.knobs(), runtime=rt))
            except UserFacingError:
                raise
            except Exception as error:  # a night's end: one sentence, the traceback kept
                _night_failed(rt.run_dir(run_id), run_id, error)
                return 1
    print_summary(report, Console())
    return 0


def _night_failed(run_dir: Path, run_id: str, error: Exception) -> None:
    """The traceback goes to the run's folder, the person gets a sentence and the way on."""
    trace = run_dir / "error.txt"
    trace.write_text("".join(traceback.format_exception(error)))
    console.print(
        f"[red]flywheel: night {run_id} failed: {type(error).__name__}: {escape(str(error))}[/]\n"
        f"Every finished stage is kept; `flywheel run --resume {run_id}` goes on from the "
        f"one that failed. The traceback is in {trace}."
    )


def _move(args: argparse.Namespace) -> int:
    """Promote or roll back, as a Prefect flow run; refused promotions exit 1."""
    from infra.settings import Settings

    prepare_environment(Settings().state_dir)
    from flows.moves import promote_flow, rollback_flow
    from flows.prefect_server import night_prefect

    by = args.by or getpass.getuser()
    with night_prefect():
        if args.command == "promote":
            move = asyncio.run(promote_flow(version=args.version, by=by))
        else:
            move = asyncio.run(rollback_flow(by=by))
    Console().print(move.line(), markup=False)
    return 1 if move.action == "refused" else 0


def _status(args: argparse.Namespace) -> int:
    from infra.settings import Settings

    settings = Settings()
    prepare_environment(settings.state_dir)
    from flows.serving import make_serving, serving_lines
    from flows.status import status_lines
    from infra.registry.mlflow_registry import Registry

    registry = Registry(settings)
    lines = status_lines(registry, settings)
    served = make_serving(settings)
    if served is not None:  # what the server holds beside what the registry says
        lines += asyncio.run(serving_lines(served, registry, settings.registry.model_name))
    out = Console()
    for line in lines:
        out.print(line, markup=False)
    return 0


def _serving(args: argparse.Namespace) -> int:
    """Re-sync the serving server with the registry, as a Prefect flow run."""
    from infra.settings import Settings

    prepare_environment(Settings().state_dir)
    from flows.moves import serving_sync_flow
    from flows.prefect_server import night_prefect

    with night_prefect():
        done = asyncio.run(serving_sync_flow())
    for line in done:
        Console().print(line, markup=False)
    return 0


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
    return 0


def _serve(args: argparse.Namespace) -> int:
    from infra.lm.server import serve
    from infra.settings import Settings

    serve(Settings().lm, host=args.host, port=args.port, adapter_path=args.adapter)
    return 0


def main(argv: list[str] | None = None) -> int:
    # transformers warns about its own internals on every LoRA round; nothing to act on
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    parser = argparse.ArgumentParser(prog="flywheel", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the nightly flywheel once (Prefect, ephemeral mode)")
    run.add_argument(
        "--resume", metavar="RUN_ID", help="continue a failed night; finished stages are reused"
    )
    run.set_defaults(handler=_run)
    status = sub.add_parser("status", help="production, the candidate, history, last nights")
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
    args = parser.parse_args(argv)
    from infra.errors import UserFacingError

    try:
        return args.handler(args)
    except UserFacingError as err:
        console.print(f"[red]flywheel: {escape(str(err))}")  # "[lm]" is text, not markup
        return 2


if __name__ == "__main__":
    sys.exit(main())
