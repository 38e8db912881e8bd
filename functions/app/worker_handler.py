"""Lambda entry point of the task worker, invoked by the task state machine's steps."""

from app.task_wiring import handle_worker_event as lambda_handler

__all__ = ["lambda_handler"]
