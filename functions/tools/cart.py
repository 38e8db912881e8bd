"""Pattern 4, server-minted handles: application state that spans calls.

Use it when several calls work on one piece of state (a cart, a draft, a transaction) and the
model should carry a reference to it as an ordinary argument. `cart_open` mints a handle: an
unguessable id owned by the caller that expires after an hour. `cart_add` and `cart_checkout` take
it back. The runtime stores the state durably (DynamoDB, the task table), checks the owner on
every use, and answers an unknown, expired or someone else's handle with the same tool error, so a
handle cannot be used to probe for others. Updates are conditional on the version read, so two
concurrent calls cannot lose an item. (Module-level state, a dict here, would be split across the
Lambda environments that serve the calls: keep state that spans calls in a handle.)
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from mcp_runtime.fastmcp import Context, FastMCP, ToolError

mcp = FastMCP("cart")

CART = "cart"
CART_LIFETIME_SECONDS = 3600
MAX_LINES = 50

# A stand-in catalogue; a real template user looks prices up in their own system.
PRICES_CENTS: dict[str, int] = {"apple": 50, "bread": 325, "coffee": 899, "milk": 149}

CartHandle = Annotated[str, Field(description="The cart handle returned by cart_open.", max_length=128)]


def _total_cents(lines: dict[str, int]) -> int:
    return sum(PRICES_CENTS[sku] * quantity for sku, quantity in lines.items())


def _describe(lines: dict[str, Any]) -> str:
    items = ", ".join(f"{quantity} x {sku}" for sku, quantity in sorted(lines.items())) or "nothing"
    return f"{items}; total ${_total_cents(lines) / 100:.2f}"


@mcp.tool
def cart_open(ctx: Context) -> str:
    """Open a new shopping cart and return its handle."""
    handle = ctx.handles.mint(CART, {"lines": {}}, CART_LIFETIME_SECONDS)
    return f"Opened cart {handle.handle_id}. It expires in one hour."


@mcp.tool
def cart_add(
    cart: CartHandle,
    sku: Annotated[str, Field(description=f"What to add: one of {', '.join(sorted(PRICES_CENTS))}.", max_length=64)],
    ctx: Context,
    quantity: Annotated[int, Field(description="How many.", ge=1, le=99)] = 1,
) -> str:
    """Add an item to a cart opened with cart_open."""
    if sku not in PRICES_CENTS:
        raise ToolError(f"Unknown item '{sku}'. Available: {', '.join(sorted(PRICES_CENTS))}.")
    handle = ctx.handles.resolve(CART, cart)
    lines: dict[str, int] = dict(handle.data["lines"])
    if sku not in lines and len(lines) >= MAX_LINES:
        raise ToolError(f"A cart holds at most {MAX_LINES} different items.")
    lines[sku] = lines.get(sku, 0) + quantity
    ctx.handles.update(handle, {"lines": lines})
    return f"Cart now holds {_describe(lines)}."


@mcp.tool
def cart_checkout(cart: CartHandle, ctx: Context) -> str:
    """Check out a cart: returns the order summary and closes the cart."""
    handle = ctx.handles.resolve(CART, cart)
    lines: dict[str, int] = handle.data["lines"]
    if not lines:
        raise ToolError("The cart is empty; add items with cart_add first.")
    ctx.handles.delete(handle)
    return f"Ordered {_describe(lines)}."
