"""Durable tasks: the task table, its Step Functions executions, the worker and the supervisor."""
