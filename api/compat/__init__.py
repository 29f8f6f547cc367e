"""The HTTP APIs of the systems Courier replaces (shared/seeds/003 and 004), at their own paths,
in their own shapes, over Courier's services and behind its API tokens: their clients keep
working with one header more (`Authorization: Bearer <token>`). docs/api.md#moved-in-clients."""
