# Builds the sluice binary and Terraform. The image expects
# SLUICE_DATABASE_URL (see compose.yaml): it does not run the embedded
# PostgreSQL. .dockerignore keeps make run's data dir out of the context.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/sluice ./cmd/sluice
# Terraform for infrastructure units: the last MPL-licensed release, built
# from source as `make test` does where the machine has none.
RUN CGO_ENABLED=0 GOBIN=/out go install github.com/hashicorp/terraform@v1.5.7

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl git \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home /var/lib/sluice --create-home sluice
COPY --from=build /out/sluice /usr/local/bin/sluice
COPY --from=build /out/terraform /usr/local/bin/terraform
USER sluice
WORKDIR /var/lib/sluice
ENV SLUICE_DATA_DIR=/var/lib/sluice SLUICE_LISTEN=0.0.0.0:8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s CMD ["curl", "-fsS", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["serve"]
