"""Dynamic Resource Allocation (``resource.k8s.io/v1``): the objects, the CEL environment of device
selectors and the structured allocator. Self-contained: nothing here reads the cache or a session."""
