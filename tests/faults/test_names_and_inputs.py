"""Names and inputs: base names unique ignoring case, restore picks a free name;
dangerous directory items (system roots, the home folder) are refused."""

from __future__ import annotations

import pytest

from tests.support.embedding_server import embedding_server_fixture
from tests.support.services import open_service

pytestmark = pytest.mark.faults

DIMS = 16
server = embedding_server_fixture(DIMS)


async def test_base_names_are_unique_ignoring_case_and_restore_picks_a_free_name(tmp_path, server):
    from ktui.core.errors import ValidationError

    async with open_service(tmp_path / "d", server.url) as ks:
        first = await ks.create_base("My notes")
        for taken in ("My notes", "MY NOTES", "my notes "):
            with pytest.raises(ValidationError, match="a base named 'My notes' already exists"):
                await ks.create_base(taken)
        other = await ks.create_base("Ärger")
        with pytest.raises(ValidationError, match="already exists"):
            await ks.create_base("ärger")
        with pytest.raises(ValidationError, match="already exists"):
            await ks.update_base(other.id, {"name": "my NOTES"})
        restored = await ks.restore_base(first.id, "fake::other-model", DIMS)
        again = await ks.restore_base(first.id, "fake::third-model", DIMS)
        assert (restored.name, again.name) == ("My notes (2)", "My notes (3)")
        assert (await ks.resolve_base("my notes")).id == first.id
