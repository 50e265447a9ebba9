"""HTML: the main text through trafilatura, a plain block-text fallback through lxml.

trafilatura drops navigation, footers and boilerplate and keeps headings as
Markdown, so web pages get heading-aware chunks. When it finds no main content
(a tiny page, an index page) the fallback keeps all visible text instead of
failing the item. The same block-text conversion serves EPUB chapters, where
there is no boilerplate to remove.

Before either runs, the page's navigation is removed (`drop_boilerplate`): on a
short page (under 250 characters of main text) trafilatura falls back to all the
text it sees, so the site menu used to open the first chunk. Removed:

* `<nav>` and the ARIA landmarks navigation, banner, contentinfo, menu, menubar,
  search;
* the page's own `<footer>` (not an article's), and its `<header>` when it is
  mostly links (a logo and a menu; a header holding the title stays);
* elements whose class or id names navigation (`nav`, `navbar`, `breadcrumb`…),
  and menus, headers and footers by class or id that are mostly links.

An element that holds the page's `<main>`, `<article>` or `<h1>` is never
removed. A page that is nothing but navigation (an index of links) still keeps
its text: the fallback then reads the page as it was.
"""

from __future__ import annotations

import re

import lxml.html
from lxml import etree

from ktui.core.errors import IngestError
from ktui.core.ingest.formats.text import MARKDOWN, decode_text, no_text_error
from ktui.core.models import Document

_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.IGNORECASE)
_XML_DECL_RE = re.compile(r"^\s*<\?xml[^>]*\?>")
_BLANK_LINES_RE = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_SPACES_RE = re.compile(r"[ \t\u00a0]+")
_BLOCK_TAGS = frozenset(
    ["address", "article", "aside", "blockquote", "body", "dd", "div", "dl", "dt", "figcaption", "figure", "footer", "form", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "table", "tr", "ul", "br", "h1", "h2", "h3", "h4", "h5", "h6", "title"]
)
_DROP_TAGS = ("script", "style", "noscript", "template", "svg", "head")
_NAVIGATION_XPATH = (
    "//nav | //*[@role='navigation' or @role='banner' or @role='contentinfo' or @role='menu' or @role='menubar'"
    " or @role='search']"
)
_PAGE_LEVEL = "not(ancestor::article or ancestor::main)"  # the site's header/footer, not an article's
_NAMED_XPATH = f"//*[(@class or @id) and not(self::body or self::html or self::main or self::article) and {_PAGE_LEVEL}]"
_NAV_NAMES = frozenset({"nav", "navbar", "navigation", "navmenu", "breadcrumb", "breadcrumbs", "skip", "skiplink"})
_MENU_NAMES = frozenset({"menu", "menubar", "header", "masthead", "topbar", "footer", "sitemap"})
_NAME_SPLIT_RE = re.compile(r"[\s_-]+")
_LINK_SHARE = 0.5  # an element whose words are at least this much link text is a menu


def _names(el: lxml.html.HtmlElement) -> set[str]:
    raw = f"{el.get('class') or ''} {el.get('id') or ''}".lower()
    return set(_NAME_SPLIT_RE.split(raw)) - {""}


def _holds_content(el: lxml.html.HtmlElement) -> bool:
    return bool(el.xpath(".//main | .//article | .//h1"))


def _mostly_links(el: lxml.html.HtmlElement) -> bool:
    words = len(el.text_content().split())
    return sum(len(a.text_content().split()) for a in el.iter("a")) >= _LINK_SHARE * words


def drop_boilerplate(tree: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    """Remove the page's navigation in place (see the module docstring)."""
    doomed: list[lxml.html.HtmlElement] = list(tree.xpath(_NAVIGATION_XPATH))
    doomed += [el for el in tree.xpath(f"//footer[{_PAGE_LEVEL}]") if not _holds_content(el)]
    doomed += [el for el in tree.xpath(f"//header[{_PAGE_LEVEL}]") if _mostly_links(el) and not _holds_content(el)]
    for el in tree.xpath(_NAMED_XPATH):
        names = _names(el)
        if (names & _NAV_NAMES or (names & _MENU_NAMES and _mostly_links(el))) and not _holds_content(el):
            doomed.append(el)
    for el in doomed:
        if el.getparent() is not None:  # not inside one already removed
            el.drop_tree()  # keeps the tail text, which belongs to the parent
    return tree


def decode_html(data: bytes, label: str, charset: str | None = None) -> str:
    if charset is None:
        m = _META_CHARSET_RE.search(data[:4096])
        charset = m.group(1).decode("ascii", "replace") if m else None
    return _XML_DECL_RE.sub("", decode_text(data, label, charset), count=1)


def parse_tree(html: str, label: str) -> lxml.html.HtmlElement:
    try:
        return lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError) as exc:
        raise IngestError(f"Cannot parse HTML: {label}: {exc}") from None


def tree_to_text(tree: lxml.html.HtmlElement) -> str:
    """Visible text with one blank line between blocks and `#` before headings."""
    for bad in tree.xpath("|".join(f"//{t}" for t in _DROP_TAGS)):
        if bad.getparent() is not None:
            bad.drop_tree()
    for el in tree.iter():
        tag = el.tag if isinstance(el.tag, str) else ""
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            el.text = "#" * int(tag[1]) + " " + (el.text or "").lstrip()
        if tag in ("td", "th"):
            el.tail = " | " + (el.tail or "")
        if tag in _BLOCK_TAGS:
            el.tail = "\n\n" + (el.tail or "")
            if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
                el.text = "\n\n" + el.text
    text = tree.text_content()
    text = _SPACES_RE.sub(" ", text)
    text = _BLANK_LINES_RE.sub("\n\n", text)
    return "\n".join(line.strip() for line in text.strip().split("\n"))


def html_title(tree: lxml.html.HtmlElement) -> str | None:
    title = tree.findtext(".//title")
    return " ".join(title.split()) or None if title else None


def parse_html(data: bytes, source: str, label: str, charset: str | None = None,
               url: str | None = None) -> list[Document]:
    import trafilatura  # heavy: imported on first use, not at app start

    html = decode_html(data, label, charset)
    tree = parse_tree(html, label)
    title = html_title(tree)
    drop_boilerplate(tree)
    text = trafilatura.extract(
        tree,
        url=url,
        output_format="markdown",
        include_tables=True,
        include_comments=False,
        include_links=False,
        include_images=False,
        favor_recall=True,
    )
    if not text or not text.strip():
        text = tree_to_text(drop_boilerplate(parse_tree(html, label)))
    if not text.strip():  # nothing but navigation: an index page keeps its links' text
        text = tree_to_text(parse_tree(html, label))
    if not text.strip():
        raise no_text_error(label)
    meta: dict[str, object] = {"source": source, "content_type": MARKDOWN}
    if title:
        meta["title"] = title
    return [Document(text, meta)]
