"""The profile sanitiser: hostile HTML comes out as what Mastodon keeps of a bio, and nothing more."""

from __future__ import annotations

import pytest

from fedqueue.rules.profile_html import sanitize


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("<p>hello<br>world</p>", "<p>hello<br>world</p>"),
        ("<script>alert(1)</script>after", "after"),
        ("<style>p { display: none }</style>after", "after"),
        ("<svg><script>alert(1)</script><p>in svg</p></svg>after", "after"),
        ("<img src=x onerror=alert(1)>text", "text"),
        ('<p onclick="steal()" style="color:red">x</p>', "<p>x</p>"),
        ('<a href="javascript:alert(1)">x</a>', "<a>x</a>"),
        ('<a href="data:text/html,<script>alert(1)</script>">x</a>', "<a>x</a>"),
        ('<a href=" https://x.example/">x</a>', "<a>x</a>"),
        ('<a href="https://x.example/\x01">x</a>', "<a>x</a>"),
        (
            '<a href="https://x.example/" target="_blank" rel="me evil" class="u-url x">x</a>',
            '<a href="https://x.example/" rel="me" class="u-url">x</a>',
        ),
        (
            '<a href="https://x.example/?a=1&amp;b=&quot;2">x</a>',
            '<a href="https://x.example/?a=1&amp;b=&quot;2">x</a>',
        ),
        ('<span class="h-card mention">@a</span>', '<span class="h-card mention">@a</span>'),
        ("<div><h1>Title</h1><table><tr><td>cell</td></tr></table></div>", "Titlecell"),
        ("<b><i>unclosed", "<b><i>unclosed</i></b>"),
        ("<p><b>x</p>y", "<p><b>x</b></p>y"),
        ("stray</p></b>end", "strayend"),
        ("&lt;script&gt; and 1 < 2 & 3", "&lt;script&gt; and 1 &lt; 2 &amp; 3"),
        ("<!-- a comment --><![CDATA[x]]>ok", "ok"),
        ('<p title="x"/>', "<p></p>"),
        ("<textarea><p>not text</p></textarea>ok", "ok"),
        ("tab\tand\x07bell", "tab and\ufffdbell"),
    ],
)
def test_hostile_profile_html_keeps_only_what_mastodon_keeps(given: str, kept: str) -> None:
    assert sanitize(given) == kept


def test_deep_nesting_is_cut_and_the_output_stays_balanced() -> None:
    cleaned = sanitize("<b>" * 10_000 + "deep")

    assert cleaned.count("<b>") == cleaned.count("</b>") == 32
    assert "deep" in cleaned


def test_sanitising_twice_changes_nothing_more() -> None:
    once = sanitize('<p>a <a href="https://x.example/" onclick="x">b</a><script>c</script> &amp; d</p>')

    assert sanitize(once) == once
