"""A locustfile for `gilty load --locustfile`: users GET / with 50 ms between their requests."""

from locust import HttpUser, constant, task


class Visitor(HttpUser):
    wait_time = constant(0.05)

    @task
    def root(self):
        self.client.get("/")
