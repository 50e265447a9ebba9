"""Keys typed in one burst act in the order typed, each where the keys before it left the focus.

Textual takes every key off the app's queue in `App.on_event` and forwards it to the
widget focused *at that moment* (the bare screen when nothing is); a key bound to an
action (`a` add, `F3` folder tab, `Esc` close…) only runs that action once it has
bubbled, one message queue after another, from that widget up to the app
(`App._on_key` -> `_check_bindings`, which reads the binding chain of the focus *then*).
A key that arrives while an earlier one is still on its way is therefore forwarded
before the earlier one's action has run (Textual issue #6605 reports the same ordering
inside Input and TextArea). With keys delivered in one read (a paste, a
fast typist, a terminal under load) that meant: `a F3 q` forwarded `F3` and `q` to the
bases pane before `a` had opened the add dialog; they bubbled up after it had, when
its screen was pushed but not yet composed (`push_screen` puts a screen on the stack at
once; it composes and mounts on its own loop later) and nothing in it was focused, so
`q` matched the dialog's quit and the app exited, and the letters of `a F3 / t m p`
reached no field. `F3 q` with the dialog up typed the `q` into the File tab's field
(`q` went to the file picker, which hands letters to its field, before `F3` switched).
`a F3 q j k / ? x` even quit while `?` pushed the help screen, whose mount then found
its table gone.

`KeyTypeahead` makes the app take one key at a time whenever a key can act:

* A key bound in the current binding chain (after the keymap) is *in flight* from the
  moment it is forwarded until it has been through every queue it can reach: a callback
  follows it up the same path (the widget it went to, each ancestor, the app), queued
  behind it at every step, then once more on the app's queue, behind the `focus()`
  calls and screen pushes its action queued there. Keys that arrive meanwhile wait.
* While the active screen has not mounted yet, keys wait for it: a callback queued on
  the screen runs after its Compose and Mount (a message pump dispatches those before
  its queue), then one on the app's queue behind the focus calls the mount made.
* Waiting keys are then delivered in order, each by the same `App.on_event` path a
  key just typed takes, and so wait again behind a key of theirs that acts.

A key that only types (a letter in a field or a picker tree, which `check_consume_key`
takes out of the chain) is not held back, so typing is not slowed; nothing is dropped,
rebound or reordered: every key goes where it would have gone had the user typed it
once the previous one had done its work (`q` after `a F3` lands in the folder field;
`q` on the help screen quits, as it does typed slowly).

Why here: priority bindings and `check_consume_key` decide what a key does, not when;
`Screen.AUTO_FOCUS` focuses a widget only once the screen has composed; awaiting
`push_screen` (or `wait_for_dismiss`) delays the code that pushed, not the keys the
app keeps taking off its queue. `App.on_event` is where every key from the driver
enters the DOM, so that is where a key can wait for the one before it.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from textual import events
from textual.app import App, ScreenStackError
from textual.message_pump import MessagePump
from textual.screen import Screen

log = logging.getLogger(__name__)

STUCK_SECONDS = 5.0
"""A key in flight longer than this lets the keys behind it go anyway. It relies on
Textual's message queues (a callback queued behind the key on a widget that is removed
meanwhile might never run): a safety net so that keys can never wait for ever, not part
of the ordering (keys land within milliseconds). Not shorter: at 1 s the net fired on a
machine with both cores busy (a CI run beside two CPU burners) and let `q` past an `F3`
whose tab switch had not landed yet, into the wrong field."""


class KeyTypeahead:
    """Mixin for the `App` (first in its bases): see the module's docstring."""

    _held_keys: list[events.Key]
    _key_in_flight: bool
    _holding_for: Screen[Any] | None

    _flight: int

    def _init_typeahead(self) -> None:
        self._held_keys = []
        self._key_in_flight = False
        self._flight = 0  # numbers the keys put in flight: the safety net's timer names one
        self._holding_for = None  # the screen whose mount the held keys wait for

    @property
    def _typeahead_app(self) -> App[Any]:
        assert isinstance(self, App)
        return self

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            self._held_keys.append(event)
            await self._deliver_held()
            return
        await super().on_event(event)  # type: ignore[misc]

    def _wait_for_mount(self, screen: Screen[Any]) -> bool:
        """True if `screen` has not mounted yet (its mount is then awaited, once)."""
        if screen.is_mounted:
            return False
        if self._holding_for is not screen:
            self._holding_for = screen
            if not screen.call_later(self._screen_mounted, screen):
                self._holding_for = None
                return False  # closing, never to mount: let the key take its usual path
        return True

    def _screen_mounted(self, screen: Screen[Any]) -> None:
        """On the screen's own loop, after its Compose and Mount: continue on the app's queue,
        behind the `focus()` calls its mount made (those run from the app's queue)."""
        self._typeahead_app.call_later(self._after_mount, screen)

    async def _after_mount(self, screen: Screen[Any]) -> None:
        if self._holding_for is screen:
            self._holding_for = None
        await self._deliver_held()

    async def _deliver_held(self) -> None:
        """Deliver the held keys in order, until one is in flight or a screen is not ready."""
        while self._held_keys and not self._key_in_flight:
            try:
                screen: Screen[Any] | None = self._typeahead_app.screen
            except ScreenStackError:
                screen = None  # no screen yet: the key takes Textual's path as it is
            if screen is not None and self._wait_for_mount(screen):
                return
            key = self._held_keys.pop(0)
            if screen is not None and self._acts(screen, key.key):
                self._key_in_flight = True
                self._flight += 1
                flight = self._flight
                self._typeahead_app.set_timer(STUCK_SECONDS, partial(self._unstick, flight))
                focused = self._typeahead_app.focused
                try:
                    await super().on_event(key)  # type: ignore[misc]
                except BaseException:
                    self._key_in_flight = False  # never leave the keys after it waiting forever
                    raise
                # forwarded: to the focused widget (the screen if none); else a priority binding ran
                self._follow((focused or screen) if key.is_forwarded else self._typeahead_app)
            else:
                await super().on_event(key)  # type: ignore[misc]

    @staticmethod
    def _acts(screen: Screen[Any], key: str) -> bool:
        """Is `key` bound anywhere in the binding chain of the focus (keys a focused field or
        picker consumes are not: Textual takes them out of the chain above it)? The chain is
        the one `App._check_bindings` reads (private, as Textual offers none cheaper: the
        public `active_bindings` runs every binding's `check_action`)."""
        return any(key in bindings.key_to_bindings for _node, bindings in screen._binding_chain)

    def _follow(self, pump: MessagePump) -> None:
        """Queue the in-flight key's follower on `pump`, behind the key."""
        if pump is self:
            self._typeahead_app.call_later(self._landed)
        elif not pump.call_later(self._step, pump):
            self._step(pump)  # closing: its queue still runs what it holds; go on up

    def _step(self, pump: MessagePump) -> None:
        parent = pump._parent
        self._follow(parent if isinstance(parent, MessagePump) else self._typeahead_app)

    async def _landed(self) -> None:
        """The key has been through the app (its binding ran): once more behind what its
        action queued on the app (focus calls, a screen push), then the next key."""
        self._typeahead_app.call_later(self._key_done)

    async def _key_done(self) -> None:
        self._key_in_flight = False
        await self._deliver_held()

    async def _unstick(self, flight: int) -> None:
        """The safety net (STUCK_SECONDS): the key numbered `flight` has not landed yet."""
        if self._key_in_flight and self._flight == flight:
            log.warning("a key's action did not come back within %.1f s; the keys after it go on", STUCK_SECONDS)
            await self._key_done()
