"""The broker's network server, request dispatch and the APIs it serves.

    broker.py    Broker: start-up/shutdown wiring of config, metadata, logs, topics, network, metrics
    network.py   asyncio listeners and connections: framing, one order of effects per connection
                 (pipelined produce), ordered responses, sendfile
    registry.py  ApiRegistry: api key -> handler; how to add an API module (read its docstring)
    context.py   RequestContext: what a handler gets
    topics.py    TopicManager: topics, partitions, logs, name validation, topic configs
    apis/        one module per API
"""
