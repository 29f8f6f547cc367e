"""Django's Redis cache, with one redis-py client per connection pool instead of one per call.

Django's RedisCacheClient.get_client builds a new `redis.Redis` for every cache operation, and
redis-py 8's constructor fills several hundred response callbacks each time: in a profile of
runbot's /start that was about a tenth of its CPU (three cache reads per update). A `redis.Redis`
is safe to share between threads (each command takes a connection from the pool), so one per pool
does.
"""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class SharedClientRedisCacheClient(RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key=None, *, write=False):
        index = self._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            if index not in self._pools:
                self._pools[index] = self._pool_class.from_url(self._servers[index], **self._pool_options)
            client = self._clients[index] = self._client(connection_pool=self._pools[index])
        return client


class SharedClientRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = SharedClientRedisCacheClient
