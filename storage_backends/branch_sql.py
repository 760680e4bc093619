"""The SQL condition that keeps a branch's path: one writer for the SQL ledgers (SQLite, Postgres).

A path (``awaken.ledger.interface.branch_path``) is a list of ``(branch, max_seq)`` ranges; a message is
on it when one range holds its branch and its seq is at most the range's.
"""

from __future__ import annotations

from awaken.ledger.interface import MAX_SEQ, BranchPath


def path_condition(path: BranchPath | None, *, prefix: str = "", placeholder: str = "?"
                   ) -> tuple[str, tuple[int, ...]]:
    """``(" AND (…)", arguments)`` keeping the messages on ``path`` (columns ``{prefix}branch`` and
    ``{prefix}seq``, parameters written as ``placeholder``); nothing for None (a thread that never
    branched: every message)."""
    if path is None:
        return "", ()
    branch_is = f"{prefix}branch = {placeholder}"
    clauses: list[str] = []
    args: list[int] = []
    for branch, max_seq in path:
        if max_seq == MAX_SEQ:
            clauses.append(branch_is)
            args.append(branch)
        else:
            clauses.append(f"({branch_is} AND {prefix}seq <= {placeholder})")
            args += [branch, max_seq]
    return f" AND ({' OR '.join(clauses)})", tuple(args)
