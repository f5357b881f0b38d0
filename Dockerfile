FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY opsconsole ./opsconsole
COPY ingest ./ingest
COPY alerts ./alerts
COPY runs ./runs
COPY reviews ./reviews
COPY audit ./audit
COPY notifications ./notifications
COPY exports ./exports
COPY retention ./retention
RUN pip install --no-cache-dir .
COPY . .
RUN SECRET_KEY=build ALLOWED_HOSTS=build python manage.py collectstatic --noinput -v 0
EXPOSE 8000
CMD ["uvicorn", "opsconsole.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--workers", "2", "--timeout-graceful-shutdown", "10", "--no-access-log"]
