"""The broker's network server, request dispatch and the APIs it serves.

    broker.py    Broker: start-up/shutdown wiring of config, metadata, logs, topics, network, metrics
    network.py   asyncio listeners and connections: framing, one order of effects per connection
                 (pipelined produce), ordered responses, sendfile
    registry.py  ApiRegistry: api key -> handler; how to add an API module (read its docstring)
    context.py   RequestContext: what a handler gets
    topics.py    TopicManager: topic admin operations through the metadata store, name validation, topic configs
    metadata_cache.py  MetadataCache: the cluster as the controller's UpdateMetadata last described it
    apis/        one module per API
"""
