"""The evidence commands: `verify`, `evidence` (the auditor's pack), `evidence prune`, `replay`.

Each is a thin caller of :mod:`diligence.evidence`: parse the options, call, print. A
verification that fails prints one line per problem (at most 20, then a count) and
exits 1; one that passes prints one line and exits 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..config import evidence_retain_days
from ..errors import CommandError
from ..safe_text import console_text
from ..words import counted
from .base import (
    EXIT_FAILED,
    EXIT_USAGE,
    DataPathOption,
    EvidenceOption,
    WarehouseOption,
    _parse_as_of,
    _require_data,
    _say,
    _warehouse,
    app,
    err,
    handle_errors,
    out,
    out_option,
)

__all__ = ["evidence_app"]

HeadOption = Annotated[
    str | None,
    typer.Option("--head", help="A head of the chain kept elsewhere (a Prefect artifact, a notification): "
                 "verify also checks it is in the chain."),
]


@app.command()
@handle_errors
def verify(
    pack: Annotated[
        Path | None, typer.Argument(help="An auditor's pack (a folder written by `diligence evidence`) to "
                                    "verify on its own, instead of the warehouse; or a register export "
                                    "(`export --as-of`), checked against --warehouse's evidence.",
                                    show_default=False),
    ] = None,
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    evidence: EvidenceOption = None,
    head: HeadOption = None,
    full: Annotated[bool, typer.Option("--full", help="Check everything again, taking no earlier verification "
                                       "on trust.")] = False,
    since: Annotated[str | None, typer.Option(
        "--since", help="Extend from this seal (its hash, 8 hex digits or more, or its sync id), verified before: "
        "check what was sealed after it.", show_default=False)] = None,
) -> None:
    """Prove the warehouse holds what the service said: the evidence chain links, every
    response hashes to its name, every raw row names a response of a sealed sync, and
    parsing that response again gives the row. A verification that passes is kept as a
    checkpoint: the next one checks what was sealed since, counts the older rows and
    samples them (--full checks everything). Given a register export (`export --as-of`),
    checks it against --warehouse's evidence: its files, the head it names, and that each
    row's response is one a sync up to its moment read. Exit 0 with one line, else exit 1
    and one line per problem."""
    from ..audit.pack_verify import (
        verify_pack,  # start-up (the evidence checks 1.4 s of imports): the checks load when they run
    )
    from ..audit.register_verify import is_register, register_line, verify_register
    from ..audit.verify import verify_warehouse

    if pack is not None and is_register(pack):
        if full or since is not None:
            raise CommandError("a register export is checked whole: no --full or --since", EXIT_USAGE)
        result = verify_register(pack, _warehouse(warehouse, data_path, evidence).evidence_root, head=head)
        if result.ok:
            out.print(register_line(result, pack), highlight=False)
            return
    elif pack is not None:
        if warehouse is not None or full or since is not None:
            raise CommandError("give a pack folder, or --warehouse (with --full or --since), not both", EXIT_USAGE)
        result = verify_pack(pack, head=head)
    else:
        owner = _warehouse(warehouse, data_path, evidence)
        _require_data(owner)
        if full and since is not None:
            raise CommandError("--full and --since exclude each other", EXIT_USAGE)
        result = verify_warehouse(owner, head=head, full=full, since=since)
    if result.ok:
        out.print(result.line(), highlight=False)
        return
    for line in result.lines():
        err.print(console_text(line), highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_FAILED)


evidence_app = typer.Typer(
    name="evidence",
    invoke_without_command=True,
    no_args_is_help=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(evidence_app)


@evidence_app.callback()
@handle_errors
def evidence_pack(
    ctx: typer.Context,
    company: Annotated[str | None, typer.Option(
        "--company", help="The counterparty's company ID. [required]", show_default=False)] = None,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="As it stood at this time (default: now), e.g. 2026-06-30.")
    ] = None,
    out_dir: Annotated[Path | None, out_option("Folder to write the pack into: new, empty, or an earlier pack "
                                               "of the same company (replaced whole). [required]")] = None,
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    evidence: EvidenceOption = None,
) -> None:
    """Write the auditor's pack of one counterparty: its record, connection and reading
    rights, answers and documents as they stood at --as-of, with the exact responses
    that carried them and the chain that seals them (index.html, README.md, records/,
    responses/, pack.json). `diligence verify DIR` checks it on its own."""
    if ctx.invoked_subcommand is not None:
        return
    if company is None or out_dir is None:
        raise CommandError("give --company ID and --out DIR (or `diligence evidence prune`)", EXIT_USAGE)
    from ..audit.pack import (
        write_pack,  # start-up (DuckDB 0.13 s of imports): DuckDB loads when the command runs
    )

    owner = _warehouse(warehouse, data_path, evidence)
    _require_data(owner)
    result = write_pack(owner, company, out_dir, as_of=_parse_as_of(as_of))
    out.print(f"evidence pack of {console_text(company)} as of {result.as_of.isoformat()}: "
              f"{counted(result.records, 'record')}, {counted(result.responses, 'response')}, "
              f"{counted(result.syncs, 'sync')} to head "
              f"{result.head[:16]}; open {result.out / 'index.html'}", highlight=False)


@evidence_app.command("prune")
@handle_errors
def evidence_prune(
    retain_days: Annotated[
        float | None, typer.Option("--retain-days", help="Keep the syncs of this many days (default: config "
                                   "[evidence] retain_days).", min=0.001, show_default=False),
    ] = None,
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    evidence: EvidenceOption = None,
) -> None:
    """Remove the evidence of syncs older than retain_days: their manifests, and every
    response no kept manifest names. The prune is sealed into the chain, so `verify`
    reports those syncs as pruned, not as tampered with. The newest sync is always kept."""
    from ..audit.prune import prune_evidence

    days = evidence_retain_days(retain_days)
    if days is None:
        raise CommandError("nothing to prune: the evidence is kept for ever unless [evidence] retain_days "
                           "(or --retain-days) says how many days to keep", EXIT_USAGE)
    owner = _warehouse(warehouse, data_path, evidence)
    result = prune_evidence(owner, days)
    if not result.syncs:
        out.print(f"nothing to prune: no sync began before {result.before.isoformat()}", highlight=False)
        return
    out.print(f"pruned {counted(result.syncs, 'sync')} before {result.before.isoformat()}: "
              f"{counted(result.responses, 'response')}, "
              f"{result.bytes / 1e6:.1f} MB freed; the prune is sealed, head {result.head}", highlight=False)


@app.command()
@handle_errors
def replay(
    evidence: Annotated[
        str, typer.Option("--evidence", help="The evidence store to replay: a folder (e.g. "
                          "data/warehouse.evidence) or s3://bucket/prefix/.", show_default=False),
    ],
    warehouse: Annotated[
        str, typer.Option("--warehouse", "-w", help="The new warehouse to build (a DuckDB file that does not "
                          "exist yet).", show_default=False),
    ],
    until: Annotated[
        str | None, typer.Option("--until", help="Stop after this sync (its id, as in `diligence status`).")
    ] = None,
    no_models: Annotated[bool, typer.Option("--no-models", help="Rebuild raw only.")] = False,
) -> None:
    """Rebuild a warehouse from the evidence alone: each kept sync again, in order, with
    its own id and time, answered from its manifest instead of the service; then the
    models. Its raw tables, history included, equal the original's; a parser fix made
    since reaches every past sync this way."""
    from ..audit.replay import replay as run_replay

    owner = _warehouse(warehouse, None)
    result = run_replay(evidence, owner, until=until, models=not no_models, on_sync=lambda done: _say(
        f"replayed sync {done.sync_id}: {counted(done.namespaces, 'namespace')}"
        f"{f' ({done.failed} failed)' if done.failed else ''}, {counted(done.responses, 'response')}, "
        f"{done.seconds:.1f}s"))
    failed = sum(s.failed for s in result.syncs)
    out.print(f"replayed {counted(len(result.syncs), 'sync')} into {owner.display()}"
              f"{'; models built' if result.analytics is not None else ''}; its evidence head {result.head}",
              highlight=False)
    if failed:
        raise CommandError(f"{failed} namespace reads failed in the replay, as they had in the original "
                           "syncs (see above)")
