"""What every minik8s process shares: API types, selectors, the API client, informers, work queues."""
