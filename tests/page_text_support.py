"""A page's visible text, and what in it looks like a program's value rather than words (a dict, a Python literal,
a repr, a non-finite number as Python writes it, a field's key as a label, a plural that disagrees)."""
import re
from html.parser import HTMLParser

TELLS = [
    (re.compile(r"\{\s*[\"']|\[\s*'|\"\s*:"), "a JSON object or Python dict/list"),
    (re.compile(r"^(True|False|None)$|(?:[\[({:,=]\s*|\s)(True|False|None)(?=\s*[,;:)\]}]|\s*$)|[\[({:,=]\s*(True|False|None)\b"),
     "a Python True/False/None"),
    (re.compile(r"\bdatetime\.|\bDecimal\(|<QuerySet|object at 0x|\bOrderedDict\(|\bdefaultdict\("), "a Python repr"),
    (re.compile(r"(?<![\w.+-])[-+]?(nan|inf)(?![\w.+-])"), "a non-finite number as Python writes it"),
    (re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+:(?!//)"), "a snake_case field name as a label"),
]
PLURAL = re.compile(r"(?<![\d.,])\b1 (alerts|incidents|runs|rules|steps|points|mutes|reviews|decisions|channels|"
                    r"deliveries|attempts|comments|components|hours|minutes|days|entries|projects)\b")


class Visible(HTMLParser):
    """A page's text as a reader sees it: no tags, attribute values, scripts, styles or head, no form values
    (a textarea's text is what the reader typed or will edit, as an input's value is); with `skip_code`, no
    <pre>/<code> either."""

    HIDDEN = ("script", "style", "head", "template", "textarea")

    def __init__(self, skip_code=False):
        super().__init__(convert_charrefs=True)
        self.hidden = set(self.HIDDEN) | ({"pre", "code"} if skip_code else set())
        self.depth = 0
        self.texts = []

    def handle_starttag(self, tag, attrs):
        self.depth += tag in self.hidden

    def handle_endtag(self, tag):
        if tag in self.hidden and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth and data.strip():
            self.texts.append(" ".join(data.split()))


def problems_of(html, skip_code=False):
    page = Visible(skip_code)
    page.feed(html)
    found = [f"{what}: {text!r}" for text in page.texts for tell, what in TELLS if tell.search(text)]
    joined = " ".join(page.texts)
    found += [f"a plural that disagrees: {m.group(0)!r}" for m in PLURAL.finditer(joined)]
    return found
