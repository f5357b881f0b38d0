"""A postmortem pasted into a wiki runs nothing: postmortem.md renders as the text its senders and reviewers wrote.

Run names, tags and config come from any job holding the project's token; decision text from any on-call member.
postmortem.md used to pass them through as they were, so `<script>`, `<img onerror=…>` and `[x](javascript:…)`
became live HTML and links once the file was pasted into a wiki. It is rendered here as such a wiki would
render it: CommonMark with tables and raw HTML on, and no link filtering of its own.
"""
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from tests.factories import client_for

pytestmark = pytest.mark.django_db

HOSTILE = {
    "name": '<script>alert("name")</script>',
    "tags": {"team": "<img src=x onerror=alert(1)>", "wiki": "[click me](javascript:alert(2))"},
    "config": {"lr": "<iframe src=javascript:alert(3)></iframe>", "note": "<javascript:alert(4)>", "data": "data:text/html,<b>x</b>"},
    "observation": "see [the curve](javascript:alert(5)) and ![chart](javascript:alert(6))",
    "explanations": ['<a href="javascript:alert(7)">the loader</a>', "`code` *bold* ~~gone~~ | a pipe"],
    "action": "&lt;script&gt; stays as typed, and so does https://example.org/runbook",
    "owner": "javascript:alert(8)",
}
TAGS_ALLOWED = {"h1", "h2", "h3", "p", "table", "thead", "tbody", "tr", "th", "td", "code", "a", "s", "del", "em", "strong"}


class Rendered(HTMLParser):
    """Every tag, attribute and text of the rendered HTML."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.attributes, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes += [(tag, name, value or "") for name, value in attrs]

    def handle_data(self, data):
        self.text.append(data)


def as_a_wiki_renders(markdown: str) -> Rendered:
    wiki = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    wiki.validateLink = lambda url: True  # the wiki trusts the page: whatever is a link stays one
    page = Rendered()
    page.feed(wiki.render(markdown))
    return page


@pytest.fixture
def markdown(sender, oncall, owner):
    run = {"id": "r-hostile", "name": HOSTILE["name"], "tags": HOSTILE["tags"], "config": HOSTILE["config"]}
    points = [{"step": s, "metric": "loss", "value": 2.0} for s in range(20)]
    assert sender.post({"run": run, "points": points}).status_code == 202
    entry = client_for(oncall).post("/api/v1/decisions/", {
        "run": "r-hostile", **{k: HOSTILE[k] for k in ("observation", "explanations", "action", "owner")},
    }, content_type="application/json")
    assert entry.status_code == 201, entry.content
    answer = client_for(owner).get("/api/v1/runs/r-hostile/postmortem.md")
    assert answer.status_code == 200
    return answer.content.decode()


def test_the_postmortem_renders_no_html_and_no_link_but_http(markdown):
    page = as_a_wiki_renders(markdown)
    assert set(page.tags) <= TAGS_ALLOWED, set(page.tags) - TAGS_ALLOWED
    assert not [a for a in page.attributes if a[1].startswith("on") or a[1] in ("src", "style")]
    links = [value for tag, name, value in page.attributes if name == "href"]
    assert all(link.startswith(("http://", "https://", "/", "#")) for link in links), links


def test_the_postmortem_reads_as_the_text_that_was_written(markdown):
    text = " ".join(as_a_wiki_renders(markdown).text)
    for written in [HOSTILE["name"], *HOSTILE["explanations"], HOSTILE["observation"], HOSTILE["action"], HOSTILE["owner"]]:
        assert written in text, written
    assert "<img src=x onerror=alert(1)>" in text and "[click me](javascript:alert(2))" in text
