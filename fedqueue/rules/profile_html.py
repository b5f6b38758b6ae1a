"""Profile HTML cut down to what Mastodon keeps of a remote bio (pure: no I/O).

Kept: `p`, `br`, `a` (`href` if http(s), `rel`, `class`), `span` (`class`) and a few inline
tags; `class` and `rel` keep only the words Mastodon's sanitiser knows. Everything else goes:
other tags (their text stays, escaped), every other attribute, comments, and the content of
`script`, `style` and the other elements whose text is not text. The output is well formed:
every kept tag is closed, text and attribute values are escaped.
"""

from __future__ import annotations

from html import escape
from html.parser import HTMLParser
from urllib.parse import urlsplit

from fedqueue.rules.wording import inert

#: Tags kept, with the attributes each may keep.
ALLOWED: dict[str, frozenset[str]] = {
    "p": frozenset(),
    "br": frozenset(),
    "a": frozenset({"href", "rel", "class"}),
    "span": frozenset({"class"}),
    "b": frozenset(),
    "strong": frozenset(),
    "i": frozenset(),
    "em": frozenset(),
    "u": frozenset(),
    "s": frozenset(),
    "del": frozenset(),
    "code": frozenset(),
}
VOID = frozenset({"br"})
#: Elements whose content is dropped with them: it is code, styling or markup, never text.
DROPPED_WITH_CONTENT = frozenset(
    {
        "script",
        "style",
        "template",
        "iframe",
        "object",
        "embed",
        "noscript",
        "textarea",
        "title",
        "svg",
        "math",
    }
)
#: The words of `class` Mastodon keeps (microformats, mentions, hashtags, its link shortening).
CLASS_WORDS = frozenset({"h-card", "u-url", "mention", "hashtag", "invisible", "ellipsis"})
REL_WORDS = frozenset({"nofollow", "noopener", "noreferrer", "me", "tag"})
#: Tags nested deeper than this are dropped (their text stays): no page-deep nesting.
MAX_DEPTH = 32


def http_url(value: str) -> bool:
    """Whether `value` is an absolute http(s) URL with a host and nothing a browser would reinterpret."""
    if value != value.strip() or inert(value) != value or any(c.isspace() for c in value):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _words(value: str, allowed: frozenset[str]) -> str:
    return " ".join(dict.fromkeys(word for word in value.split() if word in allowed))


class _Sanitiser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.open: list[str] = []
        self.dropping: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.dropping or tag in DROPPED_WITH_CONTENT:
            if tag in DROPPED_WITH_CONTENT and tag not in VOID:
                self.dropping.append(tag)
            return
        if tag not in ALLOWED or len(self.open) >= MAX_DEPTH:
            return
        kept: list[tuple[str, str]] = []
        for name, value in attrs:
            if name not in ALLOWED[tag] or value is None:
                continue
            if name == "href":
                value = value if http_url(value) else ""
            elif name == "class":
                value = _words(value, CLASS_WORDS)
            elif name == "rel":
                value = _words(value, REL_WORDS)
            if value and name not in (k for k, _ in kept):
                kept.append((name, value))
        self.out.append(f"<{tag}" + "".join(f' {k}="{escape(v, quote=True)}"' for k, v in kept) + ">")
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in DROPPED_WITH_CONTENT:
            return  # `<script/>` has no content to drop
        self.handle_starttag(tag, attrs)
        if tag in self.open and tag not in VOID and self.open[-1] == tag:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.dropping:
            if tag == self.dropping[-1]:
                self.dropping.pop()
            return
        if tag not in self.open:
            return
        while self.open:  # close what was left open inside it, as a browser would
            closed = self.open.pop()
            self.out.append(f"</{closed}>")
            if closed == tag:
                break

    def handle_data(self, data: str) -> None:
        if not self.dropping:
            self.out.append(escape(inert(data), quote=False))

    def result(self) -> str:
        self.close()
        return "".join(self.out) + "".join(f"</{tag}>" for tag in reversed(self.open))


def sanitize(html: str) -> str:
    """`html` with only what Mastodon keeps of a bio: safe to embed in any page as it is."""
    parser = _Sanitiser()
    parser.feed(html)
    return parser.result()
