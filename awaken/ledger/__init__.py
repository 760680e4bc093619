"""The ledger: the only history authority. ``interface`` is the storage plugin boundary."""

from .interface import (
    ALL_OWNERS as ALL_OWNERS,
)
from .interface import (
    LEDGER_GROUP as LEDGER_GROUP,
)
from .interface import (
    TITLE_LIMIT as TITLE_LIMIT,
)
from .interface import (
    AdmissionFacts as AdmissionFacts,
)
from .interface import (
    AllOwners as AllOwners,
)
from .interface import (
    Branch as Branch,
)
from .interface import (
    BranchesUnsupported as BranchesUnsupported,
)
from .interface import (
    Commit as Commit,
)
from .interface import (
    DuplicateRun as DuplicateRun,
)
from .interface import (
    Fork as Fork,
)
from .interface import (
    Ledger as Ledger,
)
from .interface import (
    OwnerFilter as OwnerFilter,
)
from .interface import (
    PendingCall as PendingCall,
)
from .interface import (
    PendingKind as PendingKind,
)
from .interface import (
    RunRecord as RunRecord,
)
from .interface import (
    RunSummary as RunSummary,
)
from .interface import (
    ThreadPage as ThreadPage,
)
from .interface import (
    ThreadRecord as ThreadRecord,
)
from .interface import (
    ThreadSummary as ThreadSummary,
)
from .interface import (
    ThreadView as ThreadView,
)
from .interface import (
    WriteClock as WriteClock,
)
from .interface import (
    answered_in as answered_in,
)
from .interface import (
    branch_path as branch_path,
)
from .interface import (
    check_limit as check_limit,
)
from .interface import (
    decode_cursor as decode_cursor,
)
from .interface import (
    encode_cursor as encode_cursor,
)
from .interface import (
    imported_updated_at as imported_updated_at,
)
from .interface import (
    known_backends as known_backends,
)
from .interface import (
    last_run_of as last_run_of,
)
from .interface import (
    ledger_class as ledger_class,
)
from .interface import (
    model_window as model_window,
)
from .interface import (
    on_path as on_path,
)
from .interface import (
    run_summary as run_summary,
)
from .interface import (
    thread_title as thread_title,
)
from .interface import (
    tools_from_json as tools_from_json,
)
from .interface import (
    tools_to_json as tools_to_json,
)
