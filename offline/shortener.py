"""A shortener for the sandbox, tests and benchmarks: short.example/<n> links that remember where
they lead, so the sandbox can follow a verification link itself."""


class MemoryShortener:
    def __init__(self):
        self.links: dict[str, str] = {}

    def shorten(self, url: str) -> str:
        short = f"https://short.example/{len(self.links) + 1}"
        self.links[short] = url
        return short

    def follow(self, url: str) -> str | None:
        return self.links.get(url)
