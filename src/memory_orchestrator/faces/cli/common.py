"""What every CLI command shares: the root options, option types, one service call, output,
and the one mapping from the error tree (`errors.py`) to a stderr line and an exit code.

Exit codes: 2 for what the user can fix by asking differently (bad input, bad settings, an
unknown store, a bad dataset: `UsageError`), 1 for the rest (a failing store, an unknown
trace, an unusable outbox, a missing extra).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import anyio
import typer
from pydantic import BaseModel, ValidationError

from memory_orchestrator import errors
from memory_orchestrator.errors import (
    BackendError,
    InvalidRequest,
    OrchestratorError,
    UsageError,
)
from memory_orchestrator.faces.cli import render
from memory_orchestrator.faces.shared import client, identity
from memory_orchestrator.models import HealthCheck, HealthReport, MemoryType, Status
from memory_orchestrator.service import Orchestrator, call_bound_s
from memory_orchestrator.settings import Settings, load_settings

T = TypeVar("T")
ModelT = TypeVar("ModelT", bound=BaseModel)
ResultT = TypeVar("ResultT", bound=BaseModel)

USAGE_ERROR = 2
FAILURE = 1


@dataclass(frozen=True)
class State:
    """The root options, shared by every command."""

    config: Path | None = None
    backend: str | None = None
    data_dir: Path | None = None
    json: bool = False
    verbose: bool = False

    def settings(self) -> Settings:
        return load_settings(self.config, backend=self.backend, data_dir=self.data_dir)


JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
TaskOpt = Annotated[str | None, typer.Option("--task", help="The task the memories are for.")]
EntityOpt = Annotated[
    list[str] | None, typer.Option("--entity", "-e", help="Only memories about this entity.")
]
TypeOpt = Annotated[
    list[MemoryType] | None, typer.Option("--type", "-t", help="Only this memory type.")
]
SinceOpt = Annotated[str | None, typer.Option("--since", help="From this ISO date/time.")]
UntilOpt = Annotated[str | None, typer.Option("--until", help="Up to this ISO date/time.")]
AsOfOpt = Annotated[
    str | None, typer.Option("--as-of", help="Rank as if now were this ISO date/time.")
]
HistoryOpt = Annotated[
    bool, typer.Option("--history", help="Also show memories a later one corrected.")
]


def state_of(ctx: typer.Context) -> State:
    state = ctx.find_object(State)
    return state if state is not None else State()


def drop_none(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def validate(model: type[ModelT], **values: Any) -> ModelT:
    """Build a request model; unset options are left out so the model's defaults apply."""
    return guarded(lambda: model.model_validate(drop_none(**values)))


def filters_from(
    entities: list[str] | None,
    types: list[MemoryType] | None,
    since: str | None,
    until: str | None,
) -> dict[str, Any] | None:
    time_range = drop_none(start=since, end=until) or None
    if not (entities or types or time_range):
        return None
    return {"entity_ids": entities or [], "memory_types": types or [], "time_range": time_range}


def call_service(
    ctx: typer.Context,
    action: Callable[[Orchestrator], Awaitable[T]],
    settings: Settings | None = None,
    *,
    creates: bool = False,
) -> T:
    """Open an orchestrator, make one call, close it; expected failures end the command.

    A command that only reads (`creates` off) fails with exit code 2 when the store file does
    not exist and nothing else of ours does either (no traces, no outbox: a mistyped
    --data-dir must not answer "nothing found"); one that writes creates it and says so on
    stderr."""
    chosen = settings or guarded(state_of(ctx).settings)
    if not creates:
        require_store(chosen)

    async def go() -> T:
        orchestrator = Orchestrator.from_settings(chosen)
        try:
            return await action(orchestrator)
        finally:
            if orchestrator.created_store is not None:
                render.note(f"created an empty memory store at {orchestrator.created_store}")
            await orchestrator.close()

    return guarded(lambda: anyio.run(go))


def ask(
    ctx: typer.Context,
    op: str,
    request: BaseModel | None,
    result: type[ResultT],
    action: Callable[[Orchestrator], Awaitable[ResultT]],
    *,
    creates: bool = False,
) -> ResultT:
    """One service call (`op` of `faces.shared.server.OPERATIONS`): through the shared process
    of these settings when one runs (nothing is loaded here then), else in this process
    (`call_service`). Expected failures end the command as `call_service`'s do."""
    chosen = guarded(state_of(ctx).settings)
    if not creates:
        require_store(chosen)
    found, why = guarded(lambda: shared_call(chosen, op, request, result))
    if found is not None:
        return found
    answer = call_service(ctx, action, chosen, creates=creates)
    if isinstance(answer, HealthReport):  # say how the command ran, as the servers' health does
        note = HealthCheck(name="shared_process", status=Status.OK, detail=why)
        return answer.model_copy(update={"checks": (*answer.checks, note)})
    return answer


def shared_call(
    settings: Settings, op: str, request: BaseModel | None, result: type[ResultT]
) -> tuple[ResultT | None, str]:
    """`op` answered by the shared process of `settings`; (None, why) when none runs or it
    cannot be used, and for a read that it dropped midway (it is then asked here). A write
    it dropped midway ends the command: it may have been stored."""
    if not settings.shared_process.enabled:
        return None, "off ([shared_process] enabled = false): this command ran in its own process"
    try:
        path = identity.socket_path(settings)
        connection = client.connect_to(path, identity.settings_key(settings), timeout_s=2.0)
    except client.Unavailable as exc:
        return None, f"not used ({exc}): this command ran in its own process"
    budget = call_bound_s(settings) + 60
    asked = request.model_dump(mode="json") if request is not None else {}
    with connection:
        try:
            answer = connection.call(op, asked, timeout_s=budget)
        except client.CallFailed as exc:
            raise _rebuilt(exc) from None
        except client.Unavailable as exc:
            if op == "write":
                raise OrchestratorError(
                    f"{exc}: the write may or may not have been stored; search for it before"
                    " writing it again (a repeated write is skipped as a duplicate)"
                ) from exc
            return None, f"not used ({exc}): this command ran in its own process"
    return result.model_validate(answer), ""


def _rebuilt(failed: client.CallFailed) -> OrchestratorError:
    """The service's error again, from its class name and message."""
    kind = getattr(errors, failed.kind, None)
    if isinstance(kind, type) and issubclass(kind, OrchestratorError):
        return kind(str(failed))
    return OrchestratorError(str(failed))


def require_store(chosen: Settings) -> None:
    """End the command (exit code 2) when the store file does not exist and nothing else of
    ours does either (no traces, no outbox): a mistyped --data-dir must not answer "nothing
    found" or serve an empty store."""
    store_file = chosen.store_file()
    ours = (store_file, chosen.trace_path(), chosen.outbox_path())
    if store_file is not None and not any(p.exists() for p in ours if p):
        fail(
            f"no memory store at {store_file} (data dir {chosen.data_dir}): check --data-dir,"
            " ORCHESTRATOR_DATA_DIR or [embedded] path; `orchestrator write` or"
            " `orchestrator serve` create one",
            USAGE_ERROR,
        )


def say_if_lexical_only(settings: Settings) -> None:
    """One line on stderr when the semantic stage is asked for and its model is missing: the
    answer was found by words alone, and `orchestrator models install` fixes it."""
    from memory_orchestrator.derived.embedders import lexical_only

    sem = settings.semantic
    note = lexical_only(sem.enabled, sem.model, model_dir=sem.model_dir, data_dir=settings.data_dir)
    if note is not None:
        render.note(f"note: {note}")


def show(ctx: typer.Context, json: bool, result: T, printer: Callable[[T], None]) -> None:
    if json or state_of(ctx).json:
        render.print_json(result)
    else:
        printer(result)


def fail(message: str, code: int) -> NoReturn:
    render.error(message)
    raise typer.Exit(code)


# The errors a user can act on (`message_and_code`); anything else is a bug, and its
# traceback reaches the terminal with exit code 1.
USER_ERRORS = (OrchestratorError, ValueError)


def message_and_code(exc: BaseException) -> tuple[str, int] | None:
    """The line and exit code for an error a user can act on; None for a bug."""
    if isinstance(exc, ValidationError):
        return render.describe(exc), USAGE_ERROR
    if isinstance(exc, InvalidRequest):
        return f"invalid input: {exc}", USAGE_ERROR
    if isinstance(exc, UsageError):
        return str(exc), USAGE_ERROR
    if isinstance(exc, BackendError):
        return f"memory store error: {exc}", FAILURE
    if isinstance(exc, OrchestratorError):
        return str(exc), FAILURE
    if isinstance(exc, ValueError):  # parse errors of options the models do not cover (--since)
        return str(exc), USAGE_ERROR
    return None


def guarded(action: Callable[[], T]) -> T:
    """Run `action`; the failures a user can act on become one stderr line and an exit code."""
    try:
        return action()
    except USER_ERRORS as exc:
        found = message_and_code(exc)
        if found is None:
            raise
        fail(*found)
