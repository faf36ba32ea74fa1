from django.contrib import admin
from django.urls import path

from shop import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("report/", views.report),
    path("spin/", views.spin),
    path("ok/", views.ok),
]
