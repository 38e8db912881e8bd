"""`make run`: the synthesized template, served on loopback as AWS would run it.

1. Synthesize the CDK app (cached by a hash of its inputs) and read its template.
2. Start an embedded moto and create what the template declares (`local_stack.provision`).
3. Give each function credentials of its own role (an assumed-role session), then enforce IAM, so
   a call a role does not allow fails with AccessDenied here as in AWS (`local_stack.iam_enforcement`).
4. Run each function in execution environments of its own (`local_stack.runtime`), with its
   handler, environment, timeout and memory from the template; the state machine invokes the
   worker through the same path.
5. Serve the template's HTTP API routes (`local_stack.http_front`), and deliver its event sources:
   the table streams its mappings read and the execution status changes its rules match
   (`local_stack.event_delivery`).

Settings (environment variables): PORT; MCP_TOOL_PACKAGES=a,b.c (the tool packages the functions serve,
default the project's `tools`); FIXTURES=conformance (adds `fixtures.conformance` to them; the platform's
test tools, `fixtures/`, come as a layer whenever a `fixtures` package is named);
LOCAL_LAYERS=dir1:dir2 (added to every function's import path, like Lambda layers; a
`sitecustomize.py` there runs at start); LOCAL_CDK_CONTEXT='{"key": "value"}' (like `-c`);
LOCAL_CDK_OUT=dir (serve an already synthesized assembly); LOCAL_IAM=off (do not enforce);
LOCAL_LAMBDA_CONCURRENCY (environments per function, default 8);
LOCAL_LAMBDA_ACCOUNT_CONCURRENCY (the account's concurrency limit, default 1000: a function past its
reserved concurrency, or past what the account leaves unreserved, is throttled as Lambda throttles
it); LOCAL_LOGS=all (also print
START/END/REPORT and metric lines, and each request); LOCAL_RECORD=file (every request and answer as
JSON lines); LOCAL_STATE_DIR=dir (the tables' items saved there at stop and restored at start,
`local_stack.persistence`); LOCAL_TIME_SCALE=N (AWS's delivery periods divided by N: Lambda's async
retry waits of about 1 and 2 minutes, and the template's rate schedules; default 1, AWS's own);
LOCAL_DROP_STATUS_EVENTS=all|P|P@seed (lose every Step Functions status event, or each with
probability P, as best-effort delivery may; default none). Both are read once, at start.
The OAuth bridge's BRIDGE_PUBLIC_ORIGIN (the template's: the API's execute-api origin) is the stack's own,
`http://127.0.0.1:<port>`: reach its sign-in pages there, not at `localhost`.
LOCAL_RELOAD=1 (the Makefile's `run` sets it): an edit under functions/ runs the import check again and
restarts every function's interpreters on the edited code (`local_stack.reload`).

Sign-in (the API function validates tokens itself, as deployed):
- AUTH=dev (default): the functions also get DEV_AUTH=1, so `Authorization: Bearer dev:<user>` is the
  development user `<user>` (quick tests, curl); real tokens of the template's issuer are validated
  as deployed. LOCAL_DEFAULT_USER=name: a request without an Authorization header is sent on as
  that development user's (clients that cannot send headers, such as the conformance suite).
- AUTH=oauth: no DEV_AUTH. The local authorization server (oidc-provider, `local_stack.oauth`) starts
  with development users (LOCAL_OAUTH_USERS="alice:pw,bob:pw"), and the template is synthesized
  against it as a bring-your-own issuer: MCP clients discover it from the 401, register, sign in,
  and call with its tokens. LOCAL_OAUTH_ACCESS_TOKEN_SECONDS shortens access tokens (refresh tests).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any, Final, TextIO

from infra.packaging import RuntimeStdlibMissing, check_runtime_stdlib, describe_interpreter, tools_refusal

from local_stack import iam_enforcement, persistence
from local_stack.aws import (
    EmbeddedAws,
    LambdaThrottled,
    register_invoker,
    start_embedded_aws,
    unregister_function,
)
from local_stack.clients import aws_client
from local_stack.code import FunctionCode, build_function_code
from local_stack.event_delivery import EventDelivery, StatusEventDrops
from local_stack.http_front import (
    DEV_TOKEN_PREFIX,
    ApiGatewayFront,
    DevTokenAuthorizer,
    ExchangeLog,
    listening_socket,
    make_server,
)
from local_stack.oauth import LocalAuthorizationServer, start_provider
from local_stack.private_files import NotPrivate, private_directory, write_private
from local_stack.provision import ProvisionedStack, provision, serve_bridge_at
from local_stack.reload import SourceWatcher
from local_stack.runtime import (
    DEFAULT_ACCOUNT_CONCURRENCY,
    DEFAULT_MAX_ENVIRONMENTS,
    ConcurrencyLimits,
    FunctionPool,
    FunctionSpec,
    InvocationResult,
    lambda_environment,
)
from local_stack.synth import REPO, Assembly, synthesize
from local_stack.template import DeployedTemplate

STATE_ROOT: Final = REPO / "build" / "local-stack"
FIXTURE_LAYER_ROOT: Final = STATE_ROOT / "layers"
# What a local function's environment has beyond its template and the Lambda runtime's variables:
# where AWS is (AWS_ENDPOINT_URL), and no AWS config files of this machine's user; MCP_TOOL_PACKAGES
# when FIXTURES or MCP_TOOL_PACKAGES is set, MCP_REGISTER_TOOLS_AT_START when set. Nothing else differs.
LOG_NOISE: Final = ("START RequestId:", "END RequestId:", "REPORT RequestId:", '{"_aws":')
# A throttled event source mapping batch or asynchronous event is retried as Lambda retries it:
# backing off from 1 s to 5 minutes (for as long as the record or event lives).
THROTTLE_RETRY_FIRST_SECONDS: Final = 1.0
THROTTLE_RETRY_LAST_SECONDS: Final = 300.0

log = logging.getLogger("local_stack")


@dataclass(frozen=True, slots=True)
class Options:
    port: int = 0
    # The packages the functions serve (MCP_TOOL_PACKAGES; None: the template's default, `tools`).
    tool_packages: str | None = None
    register_tools_at_start: bool = False  # MCP_REGISTER_TOOLS_AT_START, passed to the functions
    layers: tuple[Path, ...] = ()
    cdk_context: Mapping[str, Any] = field(default_factory=dict)
    cdk_out: Path | None = None
    enforce_iam: bool = True
    concurrency: int = DEFAULT_MAX_ENVIRONMENTS
    account_concurrency: int = DEFAULT_ACCOUNT_CONCURRENCY
    all_logs: bool = False
    default_user: str | None = None
    record: Path | None = None
    state_dir: Path | None = None
    auth: str = "dev"
    oauth_users: str | None = None
    oauth_token_seconds: int | None = None
    time_scale: float = 1.0
    drop_status_events: str = ""
    give_up_stream_batches: int = 0
    warm_environments: int = 0
    # A stand-in for Cognito's managed login and OAuth endpoints (moto has none), and the CA file the
    # functions trust for it: the OAuth bridge sends browsers there and redeems codes there.
    cognito_login: str | None = None
    cognito_ca: str | None = None
    reload: bool = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Options:
        env = os.environ if environ is None else environ
        layers = tuple(Path(p).resolve() for p in (env.get("LOCAL_LAYERS") or "").split(os.pathsep) if p)
        return cls(
            port=int(env.get("PORT") or 0),
            tool_packages=_tool_packages(env.get("MCP_TOOL_PACKAGES"), env.get("FIXTURES")),
            register_tools_at_start=(env.get("MCP_REGISTER_TOOLS_AT_START") or "").lower() in ("1", "true"),
            layers=layers,
            cdk_context=json.loads(env.get("LOCAL_CDK_CONTEXT") or "{}"),
            cdk_out=Path(env["LOCAL_CDK_OUT"]).resolve() if env.get("LOCAL_CDK_OUT") else None,
            enforce_iam=(env.get("LOCAL_IAM") or "enforce").lower() not in ("off", "0", "false"),
            concurrency=int(env.get("LOCAL_LAMBDA_CONCURRENCY") or DEFAULT_MAX_ENVIRONMENTS),
            account_concurrency=int(env.get("LOCAL_LAMBDA_ACCOUNT_CONCURRENCY") or DEFAULT_ACCOUNT_CONCURRENCY),
            all_logs=(env.get("LOCAL_LOGS") or "").lower() == "all",
            default_user=env.get("LOCAL_DEFAULT_USER") or None,
            record=Path(env["LOCAL_RECORD"]) if env.get("LOCAL_RECORD") else None,
            state_dir=Path(env["LOCAL_STATE_DIR"]).resolve() if env.get("LOCAL_STATE_DIR") else None,
            auth=_auth_mode(env.get("AUTH")),
            oauth_users=env.get("LOCAL_OAUTH_USERS") or None,
            oauth_token_seconds=int(env["LOCAL_OAUTH_ACCESS_TOKEN_SECONDS"])
            if env.get("LOCAL_OAUTH_ACCESS_TOKEN_SECONDS")
            else None,
            time_scale=_time_scale(env.get("LOCAL_TIME_SCALE")),
            drop_status_events=env.get("LOCAL_DROP_STATUS_EVENTS") or "",
            give_up_stream_batches=int(env.get("LOCAL_GIVE_UP_STREAM_BATCHES") or 0),
            warm_environments=int(env.get("LOCAL_WARM_ENVIRONMENTS") or 0),
            cognito_login=env.get("LOCAL_COGNITO_LOGIN") or None,
            cognito_ca=env.get("LOCAL_COGNITO_CA") or None,
            reload=(env.get("LOCAL_RELOAD") or "").lower() in ("1", "on", "true", "yes"),
        )


def _time_scale(value: str | None) -> float:
    scale = float(value or 1)
    if scale < 1:
        raise ValueError(f"LOCAL_TIME_SCALE divides AWS's delivery periods: 1 or more, got {value!r}")
    return scale


def _auth_mode(value: str | None) -> str:
    mode = (value or "dev").strip().lower()
    if mode not in ("dev", "oauth"):
        raise ValueError(f"AUTH must be dev or oauth, got {value!r}")
    return mode


# The asset's packages that are the project's source (functions/<package>), not installed dependencies.
SOURCE_PACKAGES: Final = ("app", "mcp_runtime", "oauth_bridge", "tools")


def readable(line: str, sources: Mapping[str, str]) -> str:
    """A log line as a person reads it: a structured record's traceback (Powertools' `exception`) printed
    as the traceback it is after the record, and the built asset's paths as the source files'."""
    start = line.find("{")
    if start != -1:
        try:
            record = json.loads(line[start:])
        except ValueError:
            record = None
        if isinstance(record, dict) and isinstance(record.get("exception"), str):
            rest = {key: value for key, value in record.items() if key != "exception"}
            line = f"{line[:start]}{json.dumps(rest, ensure_ascii=False)}\n{record['exception'].rstrip()}"
    for built, source in sources.items():
        line = line.replace(built, source)
    return line


class LogSink:
    """Function log streams: all of it to build/local-stack/logs/<function>.log, the useful part to stdout
    (tracebacks readable, pointing at the source files: `readable`)."""

    def __init__(
        self,
        directory: Path,
        out: TextIO,
        *,
        everything: bool,
        short_names: Mapping[str, str],
        sources: Mapping[str, str] | None = None,
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._files: dict[str, TextIO] = {}
        self._directory = directory
        self._out = out
        self._everything = everything
        self._short = dict(short_names)
        self._sources = dict(sources or {})
        self._lock = threading.Lock()

    def __call__(self, function_name: str, line: str) -> None:
        with self._lock:
            target = self._files.get(function_name)
            if target is None:
                target = self._files[function_name] = open(  # noqa: SIM115 (closed in close())
                    self._directory / f"{function_name}.log", "a", encoding="utf-8"
                )
            target.write(line + "\n")
            target.flush()
            if self._everything or not line.startswith(LOG_NOISE):
                shown = readable(line, self._sources)
                self._out.write(f"[{self._short.get(function_name, function_name)}] {shown}\n")
                self._out.flush()

    def map_sources(self, sources: Mapping[str, str]) -> None:
        """Also read these built paths as the source files' (a reload's new asset)."""
        with self._lock:
            self._sources.update(sources)

    def close(self) -> None:
        with self._lock:
            for handle in self._files.values():
                handle.close()
            self._files = {}


@dataclass
class LocalStack:
    http: ThreadingHTTPServer
    thread: threading.Thread
    aws: EmbeddedAws
    provisioned: ProvisionedStack
    pools: dict[str, FunctionPool]
    assembly: Assembly
    started_seconds: float
    admin: dict[str, str]
    sink: LogSink
    delivery: EventDelivery
    provider: LocalAuthorizationServer | None = None
    state_dir: Path | None = None
    state_lock: IO[str] | None = None
    watcher: SourceWatcher | None = None
    code: FunctionCode | None = None  # the asset the functions run (`reload` builds a new one)

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        host_text = host.decode() if isinstance(host, bytes) else host
        return f"http://{host_text}:{port}/mcp"

    def invoke(self, logical_id: str, payload: bytes) -> InvocationResult:
        return self.pools[logical_id].invoke(payload)

    def stop(self) -> None:
        """Stop serving, save the state, and end every process of the stack (each step runs even when one
        before it failed: an interpreter or the authorization server left running would outlive the stack)."""
        try:
            if self.watcher is not None:
                self.watcher.stop()
            self.delivery.stop()
            self.http.shutdown()
            self.http.server_close()
            self.thread.join(timeout=5)
        finally:
            try:
                for pool in self.pools.values():
                    pool.close()  # its busy environments too: an invocation under way ends with the stack
                    unregister_function(pool.spec.name)
                if self.state_dir is not None:
                    saved = persistence.save(self.state_dir, self.provisioned, self.aws.client)
                    log.info("saved %d items to %s", saved, self.state_dir)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    state_file(self.http.server_address[1]).unlink()
                self.aws.stop()
                self.sink.close()
                if self.provider is not None:
                    self.provider.stop()
                if self.state_lock is not None:
                    self.state_lock.close()


def _tool_packages(packages: str | None, fixtures: str | None) -> str | None:
    """MCP_TOOL_PACKAGES, with `fixtures.<name>` added for each name FIXTURES lists (to the project's
    `tools` when MCP_TOOL_PACKAGES is unset); None when neither is set."""
    names = [name for name in (fixtures or "").split(",") if name]
    if packages is None and not names:
        return None
    listed = [name for name in ("tools" if packages is None else packages).split(",") if name]
    return ",".join(dict.fromkeys([*listed, *(f"fixtures.{name}" for name in names)]))


def fixture_layer() -> Path:
    """A layer holding the `fixtures` package (test tools, never in the deployed asset)."""
    layer = FIXTURE_LAYER_ROOT / "fixtures"
    layer.mkdir(parents=True, exist_ok=True)
    link = layer / "fixtures"
    target = REPO / "fixtures"
    if link.is_symlink() and link.resolve() != target.resolve():
        link.unlink()  # left by a checkout whose fixtures lived elsewhere
    if not link.exists():
        try:
            link.symlink_to(target)
        except FileExistsError:  # another stack starting at the same moment made it
            if link.resolve() != target.resolve():
                raise
    return layer


def _short_name(spec: FunctionSpec) -> str:
    lowered = spec.logical_id.lower()
    for word in ("api", "worker", "supervisor", "sweeper"):
        if word in lowered:
            return word
    return spec.logical_id


class StartRefused(Exception):
    """`make run` cannot start; the message says why, and what to do about it."""


def listen_on(port: int) -> socket.socket:
    """The front's socket, listening from the stack's first step: the template names its port, and a port
    let go until synthesis is over can be taken meanwhile. Refuses a port another process listens on."""
    try:
        return listening_socket("127.0.0.1", port)
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        raise StartRefused(
            f"port {port} is in use (another `make run`?): stop that one, or pick another port, "
            f"e.g. `PORT={port + 1} make run`"
        ) from error


def lock_state_dir(state_dir: Path, port: int) -> IO[str]:
    """One stack per state directory: a second one would lose the first one's tasks at its stop. The
    directory is its user's only (0700): the snapshots hold every item, secret and object."""
    try:
        private_directory(state_dir)
    except NotPrivate as refused:
        raise StartRefused(f"{refused}: give this stack a directory of your own (LOCAL_STATE_DIR)") from None
    handle = open(state_dir / ".lock", "a+", encoding="utf-8")  # noqa: SIM115 (held while the stack runs)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise StartRefused(
            f"the state directory {state_dir} is in use by another `make run` ({holder}): stop that one "
            "first, or give this one a directory of its own, e.g. `LOCAL_STATE_DIR=build/other make run`"
        ) from None
    handle.truncate(0)
    handle.write(f"pid {os.getpid()}, port {port}\n")
    handle.flush()
    return handle


def check_tools_import(code: FunctionCode, source: Path = REPO / "functions", layers: Sequence[Path] = ()) -> None:
    """Import the project's tools as the functions will: from the source (so a failure names your file
    and line, not the built copy's), with nothing else on the import path but what the functions have:
    the asset's packages (what deploys), the layers and the Lambda runtime's own (boto3). A package only
    the dev environment has fails here as it would in Lambda, named, with the command that adds it; so
    does a standard-library module the Lambda runtime's Python lacks, even where this interpreter has it.
    Then describe every tool, prompt and resource: one that cannot be described is refused by name and line
    (a deployed server would leave it out)."""
    provided = {
        entry.name.split(".")[0] for root in (code.task_root, *layers) if root.is_dir() for entry in root.iterdir()
    }
    packages = [package for package in SOURCE_PACKAGES if (source / package).is_dir()]
    try:
        check_runtime_stdlib(source, packages, provided)
    except RuntimeStdlibMissing as missing:
        raise StartRefused(f"a tool does not import in Lambda: {missing}") from None
    refusal = tools_refusal([str(source), str(code.task_root), *map(str, layers), str(code.runtime_dir)], source)
    if refusal is not None:
        raise StartRefused(refusal)


def start(options: Options | None = None, out: TextIO = sys.stdout) -> LocalStack:
    options = options or Options.from_environ()
    listener = listen_on(options.port)
    try:
        return _start(options, listener, out)
    except BaseException:
        listener.close()
        raise


def _start(options: Options, listener: socket.socket, out: TextIO) -> LocalStack:
    started = time.monotonic()
    port = int(listener.getsockname()[1])
    try:
        private_directory(state_file(port).parent)  # the run file's (administrator keys): its user's only
    except NotPrivate as refused:
        raise StartRefused(str(refused)) from None
    state_lock = lock_state_dir(options.state_dir, port) if options.state_dir is not None else None
    # The asset first: the tools are imported against its packages, before anything else starts.
    code = build_function_code()
    check_tools_import(code, layers=options.layers)
    provider: LocalAuthorizationServer | None = None
    cdk_context = dict(options.cdk_context)
    if options.auth == "oauth":
        resources = [f"http://127.0.0.1:{port}/mcp", f"http://localhost:{port}/mcp"]
        provider = start_provider(resources, options.oauth_users, options.oauth_token_seconds)
        cdk_context.update(provider.cdk_context())
    assembly = (
        Assembly(options.cdk_out, _stack_name_of(options.cdk_out), True, 0.0)
        if options.cdk_out is not None
        else synthesize(cdk_context)
    )
    template = DeployedTemplate.load(assembly.directory, assembly.stack_name)
    aws = start_embedded_aws()
    iam_enforcement.install()
    provisioned = provision(template, aws.client)
    serve_bridge_at(provisioned, aws.client("cognito-idp"), f"http://127.0.0.1:{port}")
    restored = (
        persistence.restore(options.state_dir, provisioned, aws.client)
        if options.state_dir
        else persistence.Restored(0, ())
    )
    admin = iam_enforcement.create_admin_user(aws.endpoint, "local-stack-admin", template.region)
    credentials = {
        spec.logical_id: iam_enforcement.assume_role_credentials(
            aws.endpoint, spec.role_arn, spec.name[:64], template.region
        )
        for spec in provisioned.functions.values()
    }
    additions = {"AWS_ENDPOINT_URL": aws.endpoint}
    additions["AWS_CONFIG_FILE"] = additions["AWS_SHARED_CREDENTIALS_FILE"] = str(STATE_ROOT / "no-aws-config")
    layers = list(options.layers)
    if options.tool_packages is not None:
        if any(name.split(".")[0] == "fixtures" for name in options.tool_packages.split(",")):
            layers.append(fixture_layer())
        additions["MCP_TOOL_PACKAGES"] = options.tool_packages
    if options.register_tools_at_start:
        additions["MCP_REGISTER_TOOLS_AT_START"] = "1"
    if options.cognito_login and provisioned.managed_login_domains:
        additions["BRIDGE_COGNITO_DOMAIN_URL"] = options.cognito_login.rstrip("/")
        if options.cognito_ca:
            additions["SSL_CERT_FILE"] = options.cognito_ca
    sink = LogSink(
        STATE_ROOT / "logs",
        out,
        everything=options.all_logs,
        short_names={spec.name: _short_name(spec) for spec in provisioned.functions.values()},
        sources=_source_paths(code),
    )
    pools: dict[str, FunctionPool] = {}
    limits = ConcurrencyLimits(
        options.account_concurrency,
        {spec.name: spec.reserved_concurrency for spec in provisioned.functions.values()},
    )
    for spec in provisioned.functions.values():
        # AUTH=dev: the functions that authenticate callers also take development tokens.
        dev_auth = options.auth == "dev" and "MCP_REQUIRE_PRINCIPAL" in spec.environment
        own = {**additions, "DEV_AUTH": "1"} if dev_auth else dict(additions)
        if "BRIDGE_PUBLIC_ORIGIN" in spec.environment:  # the template's is the execute-api host: here, loopback
            own["BRIDGE_PUBLIC_ORIGIN"] = f"http://127.0.0.1:{port}"
        if "MCP_BRIDGE_ISSUER" in spec.environment:  # the bridge's issuer is that origin too
            own["MCP_BRIDGE_ISSUER"] = f"http://127.0.0.1:{port}"
        environment = lambda_environment(
            spec, code, credentials[spec.logical_id], region=template.region, additions=own
        )
        pool = FunctionPool(spec, code, environment, tuple(layers), sink, options.concurrency, limits)
        pools[spec.logical_id] = pool
        register_invoker(spec.name, _invoker(pool))
    if options.enforce_iam:
        iam_enforcement.enforce()
        aws.use_credentials(admin)
    default_user = options.default_user if options.auth == "dev" else None
    front = ApiGatewayFront(
        provisioned.routes,
        lambda logical_id, payload: pools[logical_id].invoke(payload),
        DevTokenAuthorizer(default_user),
        ExchangeLog(options.record) if options.record else None,
        default_user=default_user,
    )
    delivery = EventDelivery.start(
        provisioned,
        lambda logical_id, payload: _delivered(_retrying_throttles(pools[logical_id], payload)),
        lambda logical_id: _streams_client(aws.endpoint, credentials[logical_id], template.region),
        lambda logical_id: _role_client("sqs", aws.endpoint, credentials[logical_id], template.region),
        time_scale=options.time_scale,
        drops=StatusEventDrops(options.drop_status_events),
        give_up_stream_batches=options.give_up_stream_batches,
    )
    http = make_server(front, listener)
    # shutdown() waits for serve_forever to look again: every 50 ms, not its default 500 ms.
    thread = threading.Thread(
        target=http.serve_forever, kwargs={"poll_interval": 0.05}, name="local-api-gateway", daemon=True
    )
    thread.start()
    for pool in pools.values():
        threading.Thread(target=pool.warm, name=f"warm-{pool.spec.name}", daemon=True).start()
    if options.warm_environments:
        _warm_the_endpoint(f"http://127.0.0.1:{http.server_address[1]}/mcp", options.warm_environments)
    stack = LocalStack(
        http,
        thread,
        aws,
        provisioned,
        pools,
        assembly,
        time.monotonic() - started,
        admin,
        sink,
        delivery,
        provider,
        options.state_dir,
        state_lock,
    )
    if options.state_dir is not None:
        out.write(
            f"state: {restored.items} items restored from {options.state_dir} (saved again when the stack stops)\n"
        )
    for task_id, execution_name in restored.lost_executions:
        for state_machine_arn in provisioned.state_machines.values():
            delivery.events.publish(persistence.lost_execution_event(state_machine_arn, task_id, execution_name))
        out.write(f"state: the execution of task {task_id} did not survive the restart: reported ABORTED\n")
    _describe(stack, code, options, additions, out)
    _write_state(stack, additions, credentials)
    stack.code = code
    if options.reload:
        stack.watcher = SourceWatcher(
            REPO / "functions", SOURCE_PACKAGES, lambda paths: reload(stack, paths, out, options.layers)
        )
        stack.watcher.start()
        out.write("reload: on (LOCAL_RELOAD): an edit under functions/ restarts the functions on the edited code\n")
    return stack


def _warm_the_endpoint(url: str, environments: int) -> None:
    """LOCAL_WARM_ENVIRONMENTS: rounds of `environments` requests at once through the front, so that many
    of the API function's environments have served requests (imports done, the server composed, the
    sealing key read) before the stack announces itself, as a deployed endpoint under traffic has. A
    harness with a short deadline (the conformance suite reads some streams within 600 ms) then never
    meets a cold interpreter. Round one is a handshake-era `initialize`, whose sealed session id reads
    the sealing key (and imports boto3); round two a `tools/list`, which lists the catalog."""
    import urllib.error
    import urllib.request

    from mcp_runtime import wire

    base = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {DEV_TOKEN_PREFIX}local-stack-warm-up",
    }
    client = {"name": "local-stack-warm-up", "version": "1.0.0"}
    initialize = {
        "jsonrpc": "2.0",
        "id": "local-stack-warm-up",
        "method": "initialize",
        "params": {"protocolVersion": wire.LEGACY_PROTOCOL_VERSION, "capabilities": {}, "clientInfo": client},
    }
    tools_list = {
        "jsonrpc": "2.0",
        "id": "local-stack-warm-up",
        "method": "tools/list",
        "params": {
            "_meta": {
                wire.META_PROTOCOL_VERSION: wire.PROTOCOL_VERSION,
                wire.META_CLIENT_CAPABILITIES: {},
                wire.META_CLIENT_INFO: client,
            }
        },
    }
    rounds = [
        (initialize, base),
        (tools_list, {**base, "mcp-protocol-version": wire.PROTOCOL_VERSION, "mcp-method": "tools/list"}),
    ]
    together = threading.Barrier(environments)

    def one() -> None:
        for message, headers in rounds:
            together.wait(timeout=120)
            request = urllib.request.Request(url, json.dumps(message).encode(), headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=120) as answer:
                    answer.read()
            except urllib.error.HTTPError as refused:  # a 401 under AUTH=oauth still ran the function
                refused.read()

    threads = [threading.Thread(target=one, name=f"warm-up-{n}") for n in range(environments)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _source_paths(code: FunctionCode) -> dict[str, str]:
    """The built asset's paths of the project's packages, and the source files they come from."""
    return {
        f"{code.task_root / package}{os.sep}": f"{REPO / 'functions' / package}{os.sep}" for package in SOURCE_PACKAGES
    }


def reload(stack: LocalStack, paths: list[str], out: TextIO, layers: Sequence[Path] = ()) -> None:
    """After an edit under functions/: the import check again, then every function on a new asset (the
    interpreters restart); a tool that does not import leaves the previous code serving."""
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    out.write(f"reload: {shown} changed\n")
    out.flush()
    started = time.monotonic()
    try:
        if stack.code is not None:  # against the running asset's packages: a tool that does not import is named
            check_tools_import(stack.code, layers=layers)
        checked = time.monotonic()
        code = build_function_code()
        built = time.monotonic()
    except StartRefused as refused:
        out.write(f"reload: {refused}\nreload: the previous code goes on serving until the next edit\n")
        out.flush()
        return
    except Exception as exc:  # the asset could not be built: say so, keep serving
        out.write(f"reload: the functions could not be built ({exc}); the previous code goes on serving\n")
        out.flush()
        return
    stack.sink.map_sources(_source_paths(code))
    for pool in stack.pools.values():
        pool.reload(code)  # the next invocation of each starts a fresh interpreter, as a new Lambda version's does
    stack.code = code
    out.write(
        f"reload: serving the edited code (asset {code.task_root.name}), import check passed in "
        f"{checked - started:.1f} s, asset built in {built - checked:.1f} s\n"
    )
    out.flush()


def _stack_name_of(directory: Path) -> str:
    templates = sorted(directory.glob("*.template.json"))
    if len(templates) != 1:
        raise ValueError(f"{directory} holds {len(templates)} templates; expected one stack")
    return templates[0].name.removesuffix(".template.json")


def _retrying_throttles(pool: FunctionPool, payload: bytes) -> InvocationResult:
    """An event source's invocation: a throttle is retried with backoff (never counted as a failure)."""
    wait = THROTTLE_RETRY_FIRST_SECONDS
    while True:
        try:
            return pool.invoke(payload)
        except LambdaThrottled:
            time.sleep(wait)
            wait = min(THROTTLE_RETRY_LAST_SECONDS, wait * 2)


def _delivered(result: InvocationResult) -> tuple[bytes, str | None]:
    return result.payload, result.function_error


def _streams_client(endpoint: str, credentials: Mapping[str, str], region: str) -> Any:
    """A DynamoDB Streams client signed as a function's role: the event source mapping reads as that role."""
    return _role_client("dynamodbstreams", endpoint, credentials, region)


def _role_client(service: str, endpoint: str, credentials: Mapping[str, str], region: str) -> Any:
    """A client signed as a function's role (Lambda reads its event sources and sends to its destinations so)."""
    return aws_client(service, endpoint=endpoint, region=region, credentials=credentials)


def _invoker(pool: FunctionPool) -> Any:
    """What moto's Lambda Invoke calls for this function, once IAM allowed the call (the state
    machine's Task states sign with its role; `lambda:InvokeFunction` on the function's ARN)."""

    def invoke(payload: bytes, headers: dict[str, str]) -> tuple[bytes, str | None]:
        result = pool.invoke(payload)
        return result.payload, result.function_error

    return invoke


def _describe(
    stack: LocalStack, code: FunctionCode, options: Options, additions: Mapping[str, str], out: TextIO
) -> None:
    source = "cached" if stack.assembly.cached else f"synthesized in {stack.assembly.seconds:.1f} s"
    lines = [f"template: {stack.assembly.stack_name} ({source}) from {stack.assembly.directory}"]
    for spec in stack.provisioned.functions.values():
        documents = stack.provisioned.role_policies.get(spec.role_arn, [])
        statements = sum(len(doc.get("Statement") or []) for doc in documents)
        lines.append(
            f"function {spec.logical_id} ({spec.name}): handler {spec.handler}, timeout {spec.timeout_seconds} s, "
            f"memory {spec.memory_mb} MB, role {spec.role_arn} ({len(documents)} policies, {statements} statements), "
            f"reserved concurrency {spec.reserved_concurrency if spec.reserved_concurrency is not None else 'none'}"
        )
    for route in stack.provisioned.routes:
        auth = route.authorization_type + (f" scopes {','.join(route.scopes)}" if route.scopes else "")
        lines.append(f"route {route.route_key} -> {route.function_logical_id} ({auth})")
    for mapping in stack.provisioned.stream_mappings:
        lines.append(
            f"event source {mapping.logical_id}: stream of {mapping.stream_arn.split('/')[1]} -> "
            f"{mapping.function_logical_id} (batch {mapping.batch_size}, {len(mapping.filter_patterns)} filters, "
            f"{mapping.parallelization_factor} at once, retries {mapping.maximum_retry_attempts}, "
            f"record age {mapping.maximum_record_age_seconds} s, bisect {mapping.bisect_batch_on_function_error}, "
            f"given up to {(mapping.on_failure_arn or 'nowhere').rsplit(':', 1)[-1]})"
        )
    for rule in stack.provisioned.event_rules:
        targets = ", ".join(target.function_logical_id for target in rule.targets)
        lines.append(f"rule {rule.logical_id}: {rule.pattern} -> {targets}")
    for scheduled in stack.provisioned.scheduled_rules:
        targets = ", ".join(target.function_logical_id for target in scheduled.targets)
        every = scheduled.period_seconds / options.time_scale
        lines.append(f"schedule {scheduled.logical_id}: every {every:g} s -> {targets}")
    if options.time_scale != 1:
        lines.append(
            f"delivery: AWS's async retry waits and schedules divided by {options.time_scale:g} (LOCAL_TIME_SCALE)"
        )
    if options.drop_status_events:
        lines.append(f"delivery: status events dropped: {options.drop_status_events} (LOCAL_DROP_STATUS_EVENTS)")
    if options.give_up_stream_batches:
        lines.append(
            f"delivery: the first {options.give_up_stream_batches} stream batches given up to the on-failure "
            "queue unread (LOCAL_GIVE_UP_STREAM_BATCHES): rehearse `make redrive DRY_RUN=1`, then `make redrive`"
        )
    if options.warm_environments:
        lines.append(
            f"warm: {options.warm_environments} requests at once, initialize then tools/list, served before the "
            "endpoint was announced (LOCAL_WARM_ENVIRONMENTS)"
        )
    lines.append(f"Lambda concurrency: account limit {options.account_concurrency} (LOCAL_LAMBDA_ACCOUNT_CONCURRENCY)")
    lines.append(f"IAM: {'enforced with each role' if options.enforce_iam else 'not enforced (LOCAL_IAM=off)'}")
    if stack.provider is not None:
        users = ", ".join(stack.provider.users)
        lines.append(f"sign-in: local authorization server {stack.provider.issuer} (oidc-provider), users {users}")
    else:
        lines.append(
            "sign-in: AUTH=dev, `Authorization: Bearer dev:<user>` (DEV_AUTH=1 added to the API function); "
            "AUTH=oauth for real sign-in"
        )
    for domain in stack.provisioned.managed_login_domains.values():
        if "BRIDGE_COGNITO_DOMAIN_URL" in additions:
            lines.append(
                f"Cognito managed login: the stand-in at {additions['BRIDGE_COGNITO_DOMAIN_URL']} (LOCAL_COGNITO_LOGIN)"
            )
        else:
            lines.append(f"not emulated: Cognito managed login and OAuth endpoints at {domain} (moto has none)")
    lines.append(f"local additions to each function's environment: {', '.join(sorted(additions))}")
    if stack.provisioned.not_emulated:
        kinds = sorted(set(stack.provisioned.not_emulated.values()))
        lines.append(f"not emulated: {', '.join(kinds)}")
    port = stack.http.server_address[1]
    lines.append(
        f"AWS (moto): {stack.aws.endpoint}, region {stack.provisioned.template.region}; administrator keys in "
        f"{state_file(port)} (`make sam-env` writes them as env files; `make tasks` and `make redrive` read them)"
    )
    lines.append(f"asset: {code.task_root}; started in {stack.started_seconds:.2f} s")
    out.write("\n".join(lines) + "\n")
    out.flush()


def _write_state(stack: LocalStack, additions: Mapping[str, str], credentials: Mapping[str, dict[str, str]]) -> None:
    """What `make sam-env` and tests need to reach this stack's resources."""
    port = stack.http.server_address[1]
    state = {
        "endpoint": stack.url,
        "awsEndpoint": stack.aws.endpoint,
        # moto's admin API (/moto-api/...) answers requests with this in X-Local-Stack-Secret only.
        "motoApiSecret": stack.aws.admin_secret,
        "stackName": stack.assembly.stack_name,
        "assembly": str(stack.assembly.directory),
        "administrator": stack.admin,
        "physicalIds": stack.provisioned.template.physical_ids,
        "resourceTypes": {resource.logical_id: resource.type for resource in stack.provisioned.template.resources()},
        "functions": {
            spec.logical_id: {"name": spec.name, "handler": spec.handler, "environment": spec.environment}
            for spec in stack.provisioned.functions.values()
        },
        "localAdditions": dict(additions),
        "credentials": dict(credentials),
        "authorizationServer": stack.provider.issuer if stack.provider is not None else None,
        "userPools": dict(stack.provisioned.user_pools),
        "queues": {queue.logical_id: queue.url for queue in stack.provisioned.queues.values()},
    }
    write_private(state_file(port), json.dumps(state, indent=2))


def state_file(port: int) -> Path:
    """Where a running stack on `port` says how to reach it (its endpoints, its administrator's keys): mode
    0600 in a 0700 directory, removed when the stack stops."""
    return STATE_ROOT / "run" / f"{port}.json"


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if (os.environ.get("LOCAL_LOGS") or "").lower() in ("all", "debug"):
        logging.getLogger("local_stack.access").setLevel(logging.DEBUG)
    print(describe_interpreter(), flush=True)
    try:
        stack = start()
    except StartRefused as refused:
        print(f"make run: {refused}", file=sys.stderr, flush=True)
        sys.exit(2)
    except KeyboardInterrupt:  # Ctrl-C while starting
        sys.exit(130)
    stop = threading.Event()
    # Ctrl-C and SIGTERM stop the stack the same quiet way (a second Ctrl-C while stopping changes nothing).
    # Installed before the endpoint is announced: a Ctrl-C right after it must find them in place.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"MCP endpoint: {stack.url}  (Ctrl-C stops)", flush=True)
    # A signal may land on any thread; the main thread runs Python's handlers only between waits.
    while not stop.wait(timeout=0.2):
        pass
    print("stopping...", flush=True)
    stack.stop()
    print("stopped", flush=True)
    # Everything is saved and stopped; tearing down moto's in-memory backends and the modules would
    # take the interpreter about two seconds more, for nothing.
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)
