"""Tools around the platform: the main job (demo), the dev server and its GraphQL client, the workload writer, and the instance setup."""
