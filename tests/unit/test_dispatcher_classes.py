"""The RM's inbound queue: registered nodes first, but the low class (registrations, strangers)
is never starved while the first class stays busy."""

from __future__ import annotations

from collections.abc import Callable

from rm.queues.dispatcher import LOW_EVERY, Dispatcher
from tests.helpers import FakeClock


def test_the_low_class_gets_one_turn_in_low_every_plus_one_under_sustained_load() -> None:
    clock = FakeClock()
    served: list[str] = []
    d: Dispatcher[str] = Dispatcher(clock, served.append, cost_s=lambda item: 0.001)
    for i in range(100):
        d.submit(f"hb{i}")
    for i in range(5):
        assert d.submit_low(f"reg{i}")
    clock.advance_to(1.0)
    assert len(served) == 105
    # After LOW_EVERY first-class items, every (LOW_EVERY + 1)-th turn is a registration.
    regs = [k for k, item in enumerate(served) if item.startswith("reg")]
    assert regs == [LOW_EVERY + k * (LOW_EVERY + 1) for k in range(5)]
    # Within each class, arrival order.
    assert [s for s in served if s.startswith("hb")] == [f"hb{i}" for i in range(100)]


def test_with_the_first_class_empty_the_low_class_is_served_at_once() -> None:
    clock = FakeClock()
    served: list[str] = []
    d: Dispatcher[str] = Dispatcher(clock, served.append)
    d.submit_low("reg0")
    d.submit_low("reg1")
    assert served == ["reg0", "reg1"]


def test_a_rebound_handler_is_wrapped_as_instrument_wrapped_the_first() -> None:
    """An RM's next life takes over its scheduler queue: the new handler is timed (and whatever
    else was installed) as the first was, wraps in the order they were installed."""
    clock = FakeClock()
    seen: list[str] = []

    def tag(name: str) -> Callable[[Callable[[str], float | None]], Callable[[str], float | None]]:
        def wrap(handler: Callable[[str], float | None]) -> Callable[[str], float | None]:
            def wrapped(item: str) -> float | None:
                seen.append(f"{name}({item})")
                return handler(item)

            return wrapped

        return wrap

    d: Dispatcher[str] = Dispatcher(clock, lambda item: seen.append(f"first:{item}"))
    d.instrument(tag("inner"))
    d.instrument(tag("outer"))
    d.submit("a")
    d.rebind(lambda item: seen.append(f"second:{item}"))
    d.submit("b")
    assert seen == ["outer(a)", "inner(a)", "first:a", "outer(b)", "inner(b)", "second:b"]
