# Build stage: a release binary.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked

# Runtime stage: the binary alone, as a non-root user.
FROM debian:bookworm-slim
RUN useradd --system --uid 10001 trainplan
COPY --from=build /src/target/release/trainplan /usr/local/bin/trainplan
USER trainplan
EXPOSE 8080
ENTRYPOINT ["trainplan"]
CMD ["serve", "--listen", "0.0.0.0:8080"]
