"""Alarms on what needs a human (API errors and throttles, internal errors answered on the wire,
failed task executions, DynamoDB throttling, stream records and status events given up to their
queues) and one dashboard of the whole request and task path,
including the server's own metrics (EMF, `mcp_runtime.observability`)."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from mcp_runtime import observability as obs
from mcp_runtime import wire
from mcp_runtime.tasks import schema

PERIOD = Duration.minutes(5)
ITERATOR_AGE_ALARM_MS = 60_000
SWEEP_BEHIND_PERIODS = 3


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        api_function: lambda_.IFunction,
        worker_function: lambda_.IFunction,
        supervisor_function: lambda_.IFunction,
        sweeper_function: lambda_.IFunction,
        state_machine: sfn.IStateMachine,
        table: dynamodb.ITable,
        http_api: apigwv2.IHttpApi,
        alarm_email: str | None,
        metrics_namespace: str,
        alarm_topic_arn: str | None = None,
        stream_failures: sqs.IQueue | None = None,
        status_event_failures: sqs.IQueue | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.metrics_namespace = metrics_namespace
        table_throttles = cloudwatch.MathExpression(
            label="Throttled reads and writes (table and index)",
            expression="readTable + writeTable + readIndex + writeIndex",
            using_metrics={
                "readTable": table.metric("ReadThrottleEvents", period=PERIOD, statistic="Sum"),
                "writeTable": table.metric("WriteThrottleEvents", period=PERIOD, statistic="Sum"),
                "readIndex": self._index_metric(table, "ReadThrottleEvents"),
                "writeIndex": self._index_metric(table, "WriteThrottleEvents"),
            },
            period=PERIOD,
        )
        self.alarms = {
            "ApiErrors": (
                api_function.metric_errors(period=PERIOD, statistic="Sum"),
                "The MCP endpoint function raised",
            ),
            "ApiThrottles": (
                api_function.metric_throttles(period=PERIOD, statistic="Sum"),
                "MCP requests were throttled by Lambda",
            ),
            "WorkerErrors": (
                worker_function.metric_errors(period=PERIOD, statistic="Sum"),
                "A task step raised (Step Functions may retry)",
            ),
            # At its reserved concurrency the worker is throttled: the workflow waits with jittered
            # backoff (up to 15 minutes a wait), so tasks are late, not failed.
            "WorkerThrottles": (
                worker_function.metric_throttles(period=PERIOD, statistic="Sum"),
                "Task runs were throttled at the worker's concurrency: tasks wait, none fails",
            ),
            "SupervisorThrottles": (
                supervisor_function.metric_throttles(period=PERIOD, statistic="Sum"),
                "The supervisor was throttled: task starts, resumes and stops wait in the stream",
            ),
            "SupervisorErrors": (
                supervisor_function.metric_errors(period=PERIOD, statistic="Sum"),
                "The supervisor raised (its stream batch or status event is retried)",
            ),
            # Start, resume and stop wait in the table's stream while Step Functions does not take them.
            "EffectsDelayed": (
                supervisor_function.metric("IteratorAge", period=PERIOD, statistic="Maximum"),
                "Task starts, resumes or stops waited over a minute in the table's stream",
            ),
            # The runtime's failures (a worker crash, a timeout, a write it could not make): a tool
            # that raises fails its task and counts ToolExceptions instead (dashboard, no page).
            "ExecutionsFailed": (
                state_machine.metric_failed(period=PERIOD, statistic="Sum"),
                "A task execution failed",
            ),
            "ExecutionsTimedOut": (
                state_machine.metric_timed_out(period=PERIOD, statistic="Sum"),
                "A task execution timed out",
            ),
            "TableThrottles": (table_throttles, "DynamoDB throttled the task table"),
            "SweeperErrors": (
                sweeper_function.metric_errors(period=PERIOD, statistic="Sum"),
                "The task sweeper raised (its next scheduled run tries again)",
            ),
            # Each repair is a task a lost status event (or a lost start) left active for up to the
            # sweep bound: worth a look even when the repair worked.
            "TasksRepaired": (
                self._sum(
                    obs.TASKS_REPAIRED, "repair", ("settled", "restarted", "resumed"), "Tasks repaired by the sweeper"
                ),
                "The sweeper settled, started or resumed tasks a lost status event, start or resume left active",
            ),
            # Behind for SWEEP_BEHIND_PERIODS runs in a row: lost events are no longer repaired within
            # the stated bound (raise sweepMaxChecks, or look at what throttles Step Functions).
            "SweepBehind": (
                self._sum(obs.SWEEP_BEHIND, "cause", ("cap", "unavailable"), "Sweeps that left stale leases"),
                "The sweeper leaves stale leases behind run after run: lost status events wait past its bound",
            ),
            # A working task whose execution runs wrote nothing for a whole lease: its tool may hang
            # (it is ended at the worker's timeout, retried, and only then failed).
            "TasksStale": (
                self._sum(obs.TASKS_STALE, "status", ("working",), "Working tasks silent for a lease"),
                "Working tasks wrote nothing for a whole lease while their execution runs: a tool may hang "
                "(make tasks STALE=10m lists them)",
            ),
            # A write the table refuses for good (an item it will not take, access) is that task's
            # failure: logged with the task id, the task set aside, every other task goes on.
            "TaskWritesRefused": (
                self._sum(
                    obs.TASK_WRITES_REFUSED,
                    "by",
                    ("sweeper", "supervisor", "worker"),
                    "Task writes the table refused",
                ),
                "The task table refused a task's write for good: that task is stuck or failed (its id is in the logs)",
            ),
            # The transport turns an unexpected exception into -32603 on the wire, so the function
            # itself succeeds: Lambda's Errors never sees these.
            "InternalErrors": (
                cloudwatch.Metric(
                    namespace=metrics_namespace,
                    metric_name=obs.REJECTED_REQUESTS,
                    dimensions_map={"code": str(wire.INTERNAL_ERROR)},
                    period=PERIOD,
                    statistic="Sum",
                ),
                "The server answered requests with -32603 (an unexpected exception)",
            ),
        }
        # A message in either queue is work given up: the stream's must be replayed within a day
        # (`make redrive`), before its records leave the stream.
        given_up = {
            "StreamRecordsGivenUp": (
                stream_failures,
                "Stream records the supervisor could not carry out were given up: run make redrive within 23 h",
            ),
            "StatusEventsUndelivered": (
                status_event_failures,
                "Execution status changes never reached the supervisor (the task sweep settles their tasks)",
            ),
        }
        for name, (queue, description) in given_up.items():
            if queue is not None:
                metric = queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum")
                self.alarms[name] = (metric, description)
        # Where alarms go: the template's own topic with an e-mail subscription (alarmEmail), a topic the team
        # already has (alarmTopicArn: a pager's or a chat's), or both.
        self.topics: list[sns.ITopic] = []
        if alarm_email:
            topic = sns.Topic(self, "AlarmTopic", display_name="MCP server alarms", enforce_ssl=True)
            topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
            self.topics.append(topic)
        if alarm_topic_arn:
            self.topics.append(sns.Topic.from_topic_arn(self, "TeamAlarmTopic", alarm_topic_arn))
        self.alarm_constructs: dict[str, cloudwatch.Alarm] = {}
        for name, (metric, description) in self.alarms.items():
            alarm = cloudwatch.Alarm(
                self,
                name,
                alarm_description=description,
                metric=metric,
                threshold=ITERATOR_AGE_ALARM_MS if name == "EffectsDelayed" else 1,
                evaluation_periods=SWEEP_BEHIND_PERIODS if name == "SweepBehind" else 1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            for topic in self.topics:
                alarm.add_alarm_action(actions.SnsAction(topic))
            self.alarm_constructs[name] = alarm

        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=f"{Stack.of(self).stack_name}-mcp", default_interval=Duration.hours(3)
        )
        api_id = http_api.api_id
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(
                title="Alarms", alarms=list(self.alarm_constructs.values()), width=24, height=3
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="HTTP API: requests and errors",
                left=[
                    self._api_metric(api_id, "Count", "Requests"),
                    self._api_metric(api_id, "4xx", "4xx (auth, throttling, bad routes)"),
                    self._api_metric(api_id, "5xx", "5xx"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="HTTP API: latency (p50, p99)",
                left=[
                    self._api_metric(api_id, "Latency", "p50", statistic="p50"),
                    self._api_metric(api_id, "Latency", "p99", statistic="p99"),
                ],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="API function",
                left=[api_function.metric_invocations(period=PERIOD), api_function.metric_errors(period=PERIOD)],
                right=[api_function.metric_duration(period=PERIOD, statistic="p99")],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Worker function",
                left=[worker_function.metric_invocations(period=PERIOD), worker_function.metric_errors(period=PERIOD)],
                right=[worker_function.metric_duration(period=PERIOD, statistic="p99")],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Supervisor: invocations and errors",
                left=[
                    supervisor_function.metric_invocations(period=PERIOD),
                    supervisor_function.metric_errors(period=PERIOD),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Supervisor: age of the oldest stream record (ms)",
                left=[supervisor_function.metric("IteratorAge", period=PERIOD, statistic="Maximum")],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Task executions",
                left=[
                    state_machine.metric_started(period=PERIOD),
                    state_machine.metric_succeeded(period=PERIOD),
                    state_machine.metric_failed(period=PERIOD),
                    state_machine.metric_aborted(period=PERIOD, label="Aborted (cancelled tasks)"),
                    state_machine.metric_timed_out(period=PERIOD),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Task table",
                left=[
                    table.metric_consumed_read_capacity_units(period=PERIOD),
                    table.metric_consumed_write_capacity_units(period=PERIOD),
                ],
                right=[table_throttles],
                width=12,
            ),
        )
        self._add_server_metrics()

    def _sum(self, metric: str, dimension: str, values: tuple[str, ...], label: str) -> cloudwatch.MathExpression:
        """The sum of `metric` over these values of its one dimension (a missing series counts as none)."""
        return cloudwatch.MathExpression(
            label=label,
            expression=" + ".join(f"FILL({value}, 0)" for value in values),
            using_metrics={
                value: cloudwatch.Metric(
                    namespace=self.metrics_namespace,
                    metric_name=metric,
                    dimensions_map={dimension: value},
                    period=PERIOD,
                    statistic="Sum",
                )
                for value in values
            },
            period=PERIOD,
        )

    # ---- the server's own metrics (EMF) ------------------------------------------------------------
    def _search(self, dimensions: str, metric: str, statistic: str, label: str) -> cloudwatch.MathExpression:
        """Every series of `metric` with exactly these dimensions (new tools show up by themselves)."""
        query = f'{{"{self.metrics_namespace}",{dimensions}}} MetricName="{metric}"'
        return cloudwatch.MathExpression(
            expression=f"SEARCH('{query}', '{statistic}', {int(PERIOD.to_seconds())})",
            label=label,
            using_metrics={},
            period=PERIOD,
        )

    def _total(self, metric: str, label: str) -> cloudwatch.MathExpression:
        query = f'{{"{self.metrics_namespace}",tool}} MetricName="{metric}"'
        return cloudwatch.MathExpression(
            expression=f"SUM(SEARCH('{query}', 'Sum', {int(PERIOD.to_seconds())}))",
            label=label,
            using_metrics={},
            period=PERIOD,
        )

    def _add_server_metrics(self) -> None:
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=(
                    f"**Server metrics** (namespace `{self.metrics_namespace}`, CloudWatch EMF from the functions' "
                    "logs): task transitions by tool, time from createdAt to the terminal status, MRTR rounds, "
                    "requests answered with an error by code (401/403/405/413 are refusals before JSON-RPC)."
                ),
                width=24,
                height=2,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Tasks: created, completed, failed, cancelled (all tools)",
                left=[
                    self._total(obs.TASKS_CREATED, "Created"),
                    self._total(obs.TASKS_COMPLETED, "Completed"),
                    self._total(obs.TASKS_FAILED, "Failed"),
                    self._total(obs.TASKS_CANCELLED, "Cancelled"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Tasks created by tool",
                left=[self._search("tool", obs.TASKS_CREATED, "Sum", "${PROP('Dim.tool')}")],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Tasks failed and cancelled by tool",
                left=[
                    self._search("tool", obs.TASKS_FAILED, "Sum", "${PROP('Dim.tool')} failed"),
                    self._search("tool", obs.TASKS_CANCELLED, "Sum", "${PROP('Dim.tool')} cancelled"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Time to terminal (ms, p50 and p99) by tool and status",
                left=[
                    self._search(
                        "status,tool", obs.TIME_TO_TERMINAL, "p50", "${PROP('Dim.tool')} ${PROP('Dim.status')} p50"
                    ),
                    self._search(
                        "status,tool", obs.TIME_TO_TERMINAL, "p99", "${PROP('Dim.tool')} ${PROP('Dim.status')} p99"
                    ),
                ],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="MRTR rounds (input_required answers) by tool, prompt, resource",
                left=[
                    self._search("tool", obs.MRTR_ROUNDS, "Sum", "tool ${PROP('Dim.tool')}"),
                    self._search("prompt", obs.MRTR_ROUNDS, "Sum", "prompt ${PROP('Dim.prompt')}"),
                    self._search("resource", obs.MRTR_ROUNDS, "Sum", "resource ${PROP('Dim.resource')}"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Rejected requests by error code",
                left=[self._search("code", obs.REJECTED_REQUESTS, "Sum", "${PROP('Dim.code')}")],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Tasks repaired by the sweeper (lost status events and starts), by repair",
                left=[self._search("repair", obs.TASKS_REPAIRED, "Sum", "${PROP('Dim.repair')}")],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Sweeps that left stale leases for the next run, by cause",
                left=[self._search("cause", obs.SWEEP_BEHIND, "Sum", "${PROP('Dim.cause')}")],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Working tasks silent for a whole lease while their execution runs (make tasks STALE=)",
                left=[self._search("status", obs.TASKS_STALE, "Sum", "${PROP('Dim.status')}")],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Task writes the table refused for good, by writer",
                left=[self._search("by", obs.TASK_WRITES_REFUSED, "Sum", "${PROP('Dim.by')}")],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Tools that raised (their tasks failed), by tool",
                left=[self._search("tool", obs.TOOL_EXCEPTIONS, "Sum", "${PROP('Dim.tool')}")],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Tools, prompts and resources left out: they could not be described (the log says why)",
                left=[self._search("component", obs.COMPONENTS_LEFT_OUT, "Sum", "${PROP('Dim.component')}")],
                width=12,
            ),
        )

    @staticmethod
    def _index_metric(table: dynamodb.ITable, name: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace="AWS/DynamoDB",
            metric_name=name,
            dimensions_map={"TableName": table.table_name, "GlobalSecondaryIndexName": schema.OWNER_INDEX},
            period=PERIOD,
            statistic="Sum",
        )

    @staticmethod
    def _api_metric(api_id: str, name: str, label: str, statistic: str = "Sum") -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace="AWS/ApiGateway",
            metric_name=name,
            dimensions_map={"ApiId": api_id},
            period=PERIOD,
            statistic=statistic,
            label=label,
        )
