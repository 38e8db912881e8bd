"""moto's server: how it finds the service and the action of each request."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from local_stack.moto_patches._registry import Patch, Patcher, register


def _dispatch_from_a_fixed_index(patcher: Patcher) -> None:
    import moto.backends as backends
    import moto.core.responses as responses

    list_modules: Callable[[], Iterable[str]] = patcher.original(backends, "list_of_moto_modules")
    method_names: Callable[[object], list[str]] = patcher.original(responses, "method_names_from_class")
    modules: list[tuple[str, ...]] = []
    names_by_class: dict[object, tuple[str, ...]] = {}

    def list_of_moto_modules() -> Iterable[str]:
        """moto's service packages, listed once: the installed package does not change while it runs."""
        if not modules:
            modules.append(tuple(list_modules()))
        return iter(modules[0])

    def method_names_from_class(clazz: object) -> list[str]:
        """A response class's methods, looked up once per class (classes are not changed at run time)."""
        if clazz not in names_by_class:
            names_by_class[clazz] = tuple(method_names(clazz))
        return list(names_by_class[clazz])

    patcher.replace(backends, "list_of_moto_modules", list_of_moto_modules)
    patcher.replace(responses, "method_names_from_class", method_names_from_class)


register(
    Patch(
        name="requests_are_dispatched_from_a_fixed_index",
        group="emulation",
        aws="An endpoint answers a request with no per-request cost beyond the request itself: which "
        "service and which action it names is known from its endpoint and its target.",
        moto="To dispatch every request, the server lists moto's package directory and stats each of its "
        "~150 entries, and inspects every member of the service's response class: about a tenth of the "
        "server's CPU under the suite's load.",
        reference="https://docs.aws.amazon.com/general/latest/gr/rande.html",
        install=_dispatch_from_a_fixed_index,
    )
)
