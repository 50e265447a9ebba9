"""EPUB through ebooklib: one document per chapter of the reading order (spine).

Chapters are XHTML without boilerplate, so they go through the lxml block-text
conversion (headings as Markdown) rather than trafilatura's main-text heuristics,
which would drop short chapters. `chapter` is the 1-based position among the
chapters that have text; `title` is the book's title.
"""

from __future__ import annotations

import io
import warnings

from ktui.core.ingest.formats.html import decode_html, parse_tree, tree_to_text
from ktui.core.ingest.formats.text import MARKDOWN, no_text_error
from ktui.core.models import Document


def parse_epub(data: bytes, source: str, label: str) -> list[Document]:
    import ebooklib
    from ebooklib import epub

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        book = epub.read_epub(io.BytesIO(data), options={"ignore_ncx": True})
    titles = book.get_metadata("DC", "title")
    book_title = titles[0][0].strip() if titles and titles[0] and titles[0][0] else None
    ordered = []
    seen: set[str] = set()
    for idref, _linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is not None and item.get_type() == ebooklib.ITEM_DOCUMENT and item.id not in seen:
            ordered.append(item)
            seen.add(item.id)
    docs: list[Document] = []
    for item in ordered:
        content = item.get_content()
        if not content or not content.strip():
            continue
        text = tree_to_text(parse_tree(decode_html(content, label), label))
        if text.strip():
            meta: dict[str, object] = {"source": source, "chapter": len(docs) + 1, "content_type": MARKDOWN}
            if book_title:
                meta["title"] = book_title
            docs.append(Document(text, meta))
    if not docs:
        raise no_text_error(label)
    return docs
