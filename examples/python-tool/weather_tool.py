"""An Awaken tool that calls an HTTP API: the current weather in a city, from Open-Meteo.

``Weather`` is a class tool (docs/tools.md): made once at start-up with its validated ``[tools.weather]``
settings, it keeps one ``httpx.AsyncClient`` (its connection pool) for every call, and the server closes
it (``aclose``) when it stops. A call looks the city up, then asks for its current weather, telling the
client each step as progress. Open-Meteo's public API
needs no key; its commercial hosts take one, which the tool reads from the environment variable named by
``api_key_env`` (never from the config file).
"""

from __future__ import annotations

from typing import Any

import attrs
import httpx

from awaken.tools import ToolContext, ToolError


@attrs.frozen
class WeatherSettings:
    """``[tools.weather]`` in config.toml."""

    geocoding_url: str = "https://geocoding-api.open-meteo.com/v1/search"
    forecast_url: str = "https://api.open-meteo.com/v1/forecast"
    timeout_seconds: float = 10.0
    #: the environment variable holding an API key (Open-Meteo's commercial hosts); None: no key
    api_key_env: str | None = None


class Weather:
    """The current weather (temperature and wind speed) in a city."""

    name = "weather"
    settings_class = WeatherSettings

    def __init__(self, settings: WeatherSettings) -> None:
        self.settings = settings
        self.http = httpx.AsyncClient(timeout=settings.timeout_seconds,
                                      headers={"user-agent": "awaken-example-weather/1"})

    async def aclose(self) -> None:
        """Called once when the server stops."""
        await self.http.aclose()

    async def __call__(self, city: str, ctx: ToolContext) -> dict[str, Any]:
        """
        Args:
            city: the city's name, e.g. Oslo
        """
        key = {"apikey": ctx.secret(self.settings.api_key_env)} if self.settings.api_key_env else {}
        ctx.progress({"step": "geocoding", "city": city})
        found = await _get(self.http, self.settings.geocoding_url, {"name": city, "count": 1, **key})
        if not found.get("results"):
            raise ToolError(f"no place called {city!r} was found")
        place = found["results"][0]
        ctx.progress({"step": "forecast", "place": place["name"]})
        weather = await _get(self.http, self.settings.forecast_url, {
            "latitude": place["latitude"], "longitude": place["longitude"],
            "current": "temperature_2m,wind_speed_10m", **key})
        current, units = weather["current"], weather.get("current_units", {})
        return {
            "place": place["name"],
            "country": place.get("country"),
            "time": current.get("time"),
            "temperature": current["temperature_2m"],
            "temperature_unit": units.get("temperature_2m", "°C"),
            "wind_speed": current["wind_speed_10m"],
            "wind_speed_unit": units.get("wind_speed_10m", "km/h"),
        }



async def _get(http: httpx.AsyncClient, url: str, params: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of a GET; a failure is a ``ToolError`` the model reads (and the run goes on)."""
    try:
        response = await http.get(url, params=params)
    except httpx.HTTPError as exc:
        raise ToolError(f"the weather service could not be reached ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise ToolError(f"the weather service answered HTTP {response.status_code}")
    return response.json()
