"""The roster relay (docs/roster.md#the-roster-relay): one process hears every host frame and
publishes, once a second, what changed (:mod:`.core`, pure; :mod:`.service`, its pika shell)."""
