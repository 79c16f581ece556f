"""Kafka message layouts as data, written by tools/refresh_schemas.py; read by format.layouts."""
