"""Where ``FileLedger`` was first importable from; the file ledger now lives in ``storage_backends.files``."""

from storage_backends.files import FileLedger, decode_frames, encode_frame, thread_file_name

__all__ = ["FileLedger", "decode_frames", "encode_frame", "thread_file_name"]
