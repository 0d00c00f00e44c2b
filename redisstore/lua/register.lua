-- register: the library's functions, named after the library, whose name
-- carries its version: a process calls only the functions of its own
-- version, whichever other versions the server holds.
--
-- Depends on: LIBRARY (put before prelude by the Go side), single (apply),
-- group (group).
-- Translates: nothing in Go: Store.Apply and Store.ApplyGroup call these.

redis.register_function(LIBRARY .. '_apply', apply)
redis.register_function(LIBRARY .. '_group', group)
