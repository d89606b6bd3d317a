# landfall: build in a Rust image, run in a slim Debian image.
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libclang1-14 libclang-common-14-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin landfall && strip target/release/landfall

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* && useradd --system --home /var/lib/landfall landfall
COPY --from=build /src/target/release/landfall /usr/local/bin/landfall
USER landfall
WORKDIR /var/lib/landfall
VOLUME /var/lib/landfall
ENTRYPOINT ["landfall"]
CMD ["run", "--config", "/etc/landfall/landfall.toml"]
